// The CPU backend's three convolution passes, as `--conv-algorithm direct` (oneDNN's convolutions) and `auto` (the
// engine's rules: matrix products for some, cpu_backend_gemm_conv.cpp; Winograd for some emulated 16-bit ones,
// cpu_backend_conv.cpp) run them, whole: im2col, col2im, transforms, conversions and allocations included; best of
// 15 runs each, the two alternating shape by shape.
// - bf16 (default): ResNet-18's strided convolutions at 64 and 224 px (a stage's entry and its downsampling), its
//   stride-1 ones over 8x8 and 7x7 images, and ResNet-20's over 8x8 at batch 128; native BF16 where the CPU runs
//   it (else the engine's emulation).
// - fp16: the stride-1 3x3 convolutions of ResNet-18 at 224 px batch 16 and 64 px batch 32 and of ResNet-20 at
//   32 px batch 128, emulated, with dy widened to FP32 and the weight gradient written wide, as Conv2d runs them.
// usage: ampwb_conv_passes [THREADS] [bf16|fp16]
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "bench_util.h"
#include "core/rng.h"

int main(int argc, char** argv) {
  using namespace ampwb;
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const bool fp16 = argc > 2 && std::string(argv[2]) == "fp16";
  const DType dtype = fp16 ? DType::F16 : DType::BF16;
  struct Conv {
    int64_t batch, side, in, out, kernel;
    int stride;
  };
  const std::vector<Conv> shapes =
      fp16 ? std::vector<Conv>{{16, 56, 64, 64, 3, 1},  {16, 28, 128, 128, 3, 1}, {16, 14, 256, 256, 3, 1},
                               {16, 7, 512, 512, 3, 1}, {32, 16, 64, 64, 3, 1},   {32, 8, 128, 128, 3, 1},
                               {128, 32, 16, 16, 3, 1}, {128, 16, 32, 32, 3, 1},  {128, 8, 64, 64, 3, 1}}
           : std::vector<Conv>{{32, 16, 64, 128, 3, 2},  {32, 16, 64, 128, 1, 2},  {16, 28, 128, 256, 3, 2},
                               {16, 28, 128, 256, 1, 2}, {16, 14, 256, 512, 3, 2}, {16, 14, 256, 512, 1, 2},
                               {32, 8, 128, 128, 3, 1},  {16, 7, 512, 512, 3, 1},  {128, 8, 64, 64, 3, 1}};
  CpuBackend direct({threads, CpuBf16::Auto, false, ConvAlgorithm::Direct});
  CpuBackend automatic({threads, CpuBf16::Auto, false, ConvAlgorithm::Auto});
  std::printf("%s\n%-42s %-7s %9s %14s %16s %9s\n", automatic.description().c_str(), dtype_name(dtype), "path",
              "forward", "backward data", "weight gradient", "sum");
  for (const Conv& s : shapes) {
    Rng rng(7);
    const ConvParams p{s.stride, static_cast<int>(s.kernel / 2)};
    const int64_t out = (s.side + 2 * p.padding - s.kernel) / s.stride + 1;
    auto random = [&](Shape shape, DType type, Layout layout) {
      Tensor wide = Tensor::empty(std::move(shape), DType::F32, layout);
      for (int64_t i = 0; i < wide.numel(); ++i) wide.data_as<float>()[i] = static_cast<float>(rng.normal());
      Tensor t = Tensor::empty(wide.shape(), type, layout);
      automatic.convert(wide, t);  // FP16's values, widened again for its dy
      return t;
    };
    const Tensor x = random({s.batch, s.in, s.side, s.side}, dtype, Layout::NHWC),
                 w = random({s.out, s.in, s.kernel, s.kernel}, dtype, Layout::NCHW);
    Tensor dy = random({s.batch, s.out, out, out}, dtype, Layout::NHWC);
    if (fp16) {
      Tensor wide = Tensor::empty(dy.shape(), DType::F32, Layout::NHWC);
      automatic.convert(dy, wide);
      dy = wide;
    }
    Tensor y = Tensor::empty({s.batch, s.out, out, out}, dtype, Layout::NHWC),
           dx = Tensor::empty(x.shape(), dtype, Layout::NHWC);
    Tensor dw = Tensor::empty(w.shape(), fp16 ? DType::F32 : dtype);
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
