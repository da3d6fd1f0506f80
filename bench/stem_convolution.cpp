// The forward pass of ResNet-18's stem (7x7, stride 2, 3 channels in, 64 out) at 64 and 224 px, and ResNet-20's (3x3,
// stride 1, 3 in, 16 out) at 32 px, in native BF16: oneDNN's convolution
// (`--conv-algorithm direct`) against the engine's own kernel (stem_convolution.cpp), the two alternating, best of 25
// runs each; FP32's oneDNN convolution beside them. Also each BF16 path's largest difference from a float64 sum,
// relative to the largest output.
// usage: ampwb_stem_convolution [THREADS]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/stem_convolution.h"
#include "bench_util.h"
#include "core/rng.h"
#include "reference/reference_ops.h"

int main(int argc, char** argv) {
  using namespace ampwb;
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  struct Stem {
    int64_t batch, side, kernel, outputs;
    int stride;
  };
  CpuBackend direct({threads, CpuBf16::Native, false, ConvAlgorithm::Direct});
  std::printf("%s\n%-34s %12s %12s %12s   %s\n", direct.description().c_str(), "stem forward", "FP32 oneDNN",
              "BF16 oneDNN", "BF16 own", "max |error| / max |y| (BF16 oneDNN, own)");
  for (const Stem s : {Stem{32, 64, 7, 64, 2}, Stem{16, 224, 7, 64, 2}, Stem{128, 32, 3, 16, 1}}) {
    Rng rng(7);
    const ConvParams p{s.stride, int(s.kernel / 2)};
    const int64_t out = (s.side + 2 * p.padding - s.kernel) / s.stride + 1;
    auto random = [&](Shape shape, Layout layout, DType dtype) {
      Tensor wide = Tensor::empty(std::move(shape), DType::F32, layout);
      for (int64_t i = 0; i < wide.numel(); ++i) wide.data_as<float>()[i] = static_cast<float>(rng.normal());
      Tensor t = Tensor::empty(wide.shape(), dtype, layout);
      direct.convert(wide, t);
      return t;
    };
    const Tensor x = random({s.batch, 3, s.side, s.side}, Layout::NHWC, DType::BF16),
                 w = random({s.outputs, 3, s.kernel, s.kernel}, Layout::NCHW, DType::BF16);
    Tensor x32 = Tensor::empty(x.shape(), DType::F32, Layout::NHWC), w32 = Tensor::empty(w.shape(), DType::F32);
    direct.convert(x, x32);
    direct.convert(w, w32);
    Tensor y[3] = {Tensor::empty({s.batch, s.outputs, out, out}, DType::F32, Layout::NHWC),
                   Tensor::empty({s.batch, s.outputs, out, out}, DType::BF16, Layout::NHWC),
                   Tensor::empty({s.batch, s.outputs, out, out}, DType::BF16, Layout::NHWC)};
    auto run = [&](int path) {
      if (path == 0) direct.conv2d_forward(x32, w32, y[0], p);
      if (path == 1) direct.conv2d_forward(x, w, y[1], p);
      if (path == 2) cpu_detail::stem_forward(x, w, y[2], p, threads);
    };
    double ms[3] = {1e300, 1e300, 1e300};
    for (int round = 0; round < 5; ++round)
      for (int path = 0; path < 3; ++path) ms[path] = std::min(ms[path], bench::best_ms([&] { run(path); }, 5));
    const ref::Array want = ref::conv2d_forward(ref::from_tensor(x), ref::from_tensor(w), p.stride, p.padding);
    double largest = 0, error[2] = {0, 0};
    for (double v : want.v) largest = std::max(largest, std::fabs(v));
    for (int path = 1; path < 3; ++path) {
      const ref::Array got = ref::from_tensor(y[path]);
      for (size_t i = 0; i < want.v.size(); ++i)
        error[path - 1] = std::max(error[path - 1], std::fabs(got.v[i] - want.v[i]));
    }
    char name[64];
    std::snprintf(name, sizeof name, "batch %ld, %ldx%ld -> %ldx%ld, %ldx%ld", long(s.batch), long(s.side),
                  long(s.side), long(out), long(out), long(s.kernel), long(s.kernel));
    std::printf("%-34s %9.3f ms %9.3f ms %9.3f ms   %.2e %.2e\n", name, ms[0], ms[1], ms[2], error[0] / largest,
                error[1] / largest);
  }
}
