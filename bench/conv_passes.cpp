// The CPU backend's three convolution passes, as `--conv-algorithm direct` (oneDNN's convolutions) and `auto` (the
// engine's rule, which takes matrix products for some: cpu_backend_gemm_conv.cpp) run them, whole: im2col, col2im,
// conversions and allocations included. ResNet-18's strided convolutions at 64 and 224 px (a stage's entry and its
// downsampling) and its stride-1 ones over 8x8 and 7x7 images, and ResNet-20's over 8x8 at batch 128; native BF16
// where the CPU runs it (else the engine's emulation); best of 15 runs each, the two alternating shape by shape.
// usage: ampwb_conv_passes [THREADS]
#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "backend/cpu/cpu_backend.h"
#include "bench_util.h"
#include "core/rng.h"

namespace {
using namespace ampwb;

Tensor random_bf16(Shape shape, Rng& rng, Layout layout) {
  Tensor wide = Tensor::empty(std::move(shape), DType::F32, layout);
  for (int64_t i = 0; i < wide.numel(); ++i) wide.data_as<float>()[i] = static_cast<float>(rng.normal());
  return wide;
}
}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  struct Conv {
    int64_t batch, side, in, out, kernel;
    int stride;
  };
  CpuBackend direct({threads, CpuBf16::Auto, false, ConvAlgorithm::Direct});
  CpuBackend automatic({threads, CpuBf16::Auto, false, ConvAlgorithm::Auto});
  std::printf("%s\n%-42s %-7s %9s %14s %16s %9s\n", automatic.description().c_str(), "BF16", "path", "forward",
              "backward data", "weight gradient", "sum");
  for (const Conv& s : {Conv{32, 16, 64, 128, 3, 2}, Conv{32, 16, 64, 128, 1, 2}, Conv{16, 28, 128, 256, 3, 2},
                        Conv{16, 28, 128, 256, 1, 2}, Conv{16, 14, 256, 512, 3, 2}, Conv{16, 14, 256, 512, 1, 2},
                        Conv{32, 8, 128, 128, 3, 1}, Conv{16, 7, 512, 512, 3, 1}, Conv{128, 8, 64, 64, 3, 1}}) {
    Rng rng(7);
    const ConvParams p{s.stride, static_cast<int>(s.kernel / 2)};
    const int64_t out = (s.side + 2 * p.padding - s.kernel) / s.stride + 1;
    Backend& cpu = automatic;
    auto bf16 = [&](Shape shape, Layout layout) {
      const Tensor wide = random_bf16(std::move(shape), rng, layout);
      Tensor t = Tensor::empty(wide.shape(), DType::BF16, layout);
      cpu.convert(wide, t);
      return t;
    };
    const Tensor x = bf16({s.batch, s.in, s.side, s.side}, Layout::NHWC),
                 w = bf16({s.out, s.in, s.kernel, s.kernel}, Layout::NCHW);
    const Tensor dy = bf16({s.batch, s.out, out, out}, Layout::NHWC);
    Tensor y = Tensor::empty(dy.shape(), DType::BF16, Layout::NHWC),
           dx = Tensor::empty(x.shape(), DType::BF16, Layout::NHWC);
    Tensor dw = Tensor::empty(w.shape(), DType::BF16);
    for (CpuBackend* b : {&direct, &automatic}) {
      const double f = bench::best_ms([&] { b->conv2d_forward(x, w, y, p); }, 15);
      const double d = bench::best_ms([&] { b->conv2d_backward_data(dy, w, dx, p); }, 15);
      const double g = bench::best_ms([&] { b->conv2d_backward_weights(x, dy, dw, p); }, 15);
      char name[128];
      std::snprintf(name, sizeof name, "batch %ld, %ldx%ld -> %ldx%ld, %ld->%ld, %ldx%ld s%d",
                    static_cast<long>(s.batch), static_cast<long>(s.side), static_cast<long>(s.side),
                    static_cast<long>(out), static_cast<long>(out), static_cast<long>(s.in), static_cast<long>(s.out),
                    static_cast<long>(s.kernel), static_cast<long>(s.kernel), s.stride);
      std::printf("%-42s %-7s %6.3f ms %11.3f ms %13.3f ms %6.3f ms\n", name, b == &direct ? "direct" : "auto", f, d, g,
                  f + d + g);
    }
  }
}
