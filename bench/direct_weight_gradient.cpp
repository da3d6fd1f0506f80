// Weight gradients of ResNet's 3x3 convolutions, native BF16 or FP32: the engine's own direct kernel
// (direct_weight_gradient.cpp) against the backend's other paths, `--conv-algorithm direct` (oneDNN's convolution)
// and the product over im2col (ConvAlgorithm::Gemm), whole, the paths alternating shape by shape; best of 25 runs
// each. Also the largest difference from a float64 sum, relative to the largest gradient, for each path.
// usage: ampwb_direct_weight_gradient [THREADS] [bf16|fp32]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/direct_weight_gradient.h"
#include "bench_util.h"
#include "core/rng.h"
#include "reference/reference_ops.h"

int main(int argc, char** argv) {
  using namespace ampwb;
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const DType dtype = argc > 2 && std::string(argv[2]) == "fp32" ? DType::F32 : DType::BF16;
  struct Conv {
    int64_t batch, side, in, out;
    int stride;
  };
  const std::vector<Conv> shapes = {
      {32, 16, 64, 64, 1},  {32, 8, 128, 128, 1}, {32, 4, 256, 256, 1}, {32, 2, 512, 512, 1},  {32, 16, 64, 128, 2},
      {32, 8, 128, 256, 2}, {32, 4, 256, 512, 2}, {16, 56, 64, 64, 1},  {16, 28, 128, 128, 1}, {16, 14, 256, 256, 1},
      {16, 7, 512, 512, 1}, {128, 32, 16, 16, 1}, {128, 16, 32, 32, 1}, {128, 8, 64, 64, 1}};
  CpuBackend direct({threads, CpuBf16::Native, false, ConvAlgorithm::Direct});
  CpuBackend gemm({threads, CpuBf16::Native, false, ConvAlgorithm::Gemm});
  std::printf("%s\n%-40s %10s %10s %10s   %s\n", direct.description().c_str(),
              dtype == DType::F32 ? "FP32 weight gradient" : "BF16 weight gradient", "oneDNN", "product", "own",
              "max |error| / max |dw| (oneDNN, product, own)");
  for (const Conv& s : shapes) {
    Rng rng(7);
    const ConvParams p{s.stride, 1};
    const int64_t out = (s.side + 2 - 3) / s.stride + 1;
    auto random = [&](Shape shape, Layout layout) {
      Tensor wide = Tensor::empty(std::move(shape), DType::F32, layout);
      for (int64_t i = 0; i < wide.numel(); ++i) wide.data_as<float>()[i] = static_cast<float>(rng.normal());
      Tensor t = Tensor::empty(wide.shape(), dtype, layout);
      direct.convert(wide, t);
      return t;
    };
    const Tensor x = random({s.batch, s.in, s.side, s.side}, Layout::NHWC),
                 dy = random({s.batch, s.out, out, out}, Layout::NHWC);
    Tensor dw[3];
    for (Tensor& d : dw) d = Tensor::empty({s.out, s.in, 3, 3}, dtype);
    double ms[3];
    auto run = [&](int path) {
      if (path == 0) direct.conv2d_backward_weights(x, dy, dw[0], p);
      if (path == 1) gemm.conv2d_backward_weights(x, dy, dw[1], p);
      if (path == 2) cpu_detail::direct_weight_gradient(x, dy, dw[2], p, threads);
    };
    for (int path = 0; path < 3; ++path) ms[path] = 1e300;
    for (int round = 0; round < 5; ++round)
      for (int path = 0; path < 3; ++path) ms[path] = std::min(ms[path], bench::best_ms([&] { run(path); }, 5));
    // The float64 sum (engine/reference), from the values as stored.
    const ref::Array want =
        ref::conv2d_backward_weights(ref::from_tensor(x), ref::from_tensor(dy), dw[0].shape(), s.stride, 1);
    double largest = 0, error[3] = {0, 0, 0};
    for (double v : want.v) largest = std::max(largest, std::fabs(v));
    for (int path = 0; path < 3; ++path) {
      const ref::Array got = ref::from_tensor(dw[path]);
      for (size_t i = 0; i < want.v.size(); ++i) error[path] = std::max(error[path], std::fabs(got.v[i] - want.v[i]));
    }
    char name[96];
    std::snprintf(name, sizeof name, "batch %ld, %ldx%ld -> %ldx%ld, %ld->%ld s%d", long(s.batch), long(s.side),
                  long(s.side), long(out), long(out), long(s.in), long(s.out), s.stride);
    std::printf("%-40s %7.3f ms %7.3f ms %7.3f ms   %.2e %.2e %.2e\n", name, ms[0], ms[1], ms[2], error[0] / largest,
                error[1] / largest, error[2] / largest);
  }
}
