// The CPU backend's training batch norm, forward (with the ReLU after it) and backward (the ReLU's mask read from
// the forward's output), FP32 against BF16 and FP16, on ResNet-18's activations at 224 px batch 16 and 64 px batch
// 32 and ResNet-20's at 32 px batch 128 (NHWC); best of 9 runs each, the types alternating shape by shape. The 16-bit
// passes move half FP32's bytes.
// usage: ampwb_batchnorm_passes [THREADS]
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "bench_util.h"
#include "core/rng.h"

int main(int argc, char** argv) {
  using namespace ampwb;
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  struct Activation {
    int64_t batch, channels, side;
  };
  const std::vector<Activation> shapes = {{16, 64, 112}, {16, 64, 56},  {16, 128, 28}, {16, 256, 14},
                                          {16, 512, 7},  {32, 64, 16},  {32, 128, 8},  {32, 256, 4},
                                          {32, 512, 2},  {128, 16, 32}, {128, 32, 16}, {128, 64, 8}};
  CpuBackend b({threads, CpuBf16::Auto, false, ConvAlgorithm::Auto});
  std::printf("%s\n%-18s %-5s %12s %12s\n", b.description().c_str(), "N,C,H=W", "type", "forward ms", "backward ms");
  for (const Activation& s : shapes) {
    for (DType dtype : {DType::F32, DType::BF16, DType::F16}) {
      Rng rng(5);
      const Shape shape{s.batch, s.channels, s.side, s.side};
      auto random = [&](DType type) {
        Tensor wide = Tensor::empty(shape, DType::F32, Layout::NHWC);
        for (int64_t i = 0; i < wide.numel(); ++i) wide.data_as<float>()[i] = static_cast<float>(rng.normal());
        Tensor t = Tensor::empty(shape, type, Layout::NHWC);
        b.convert(wide, t);
        return t;
      };
      auto channel = [&](float value) {
        Tensor t = Tensor::empty({s.channels}, DType::F32);
        for (int64_t i = 0; i < s.channels; ++i) t.data_as<float>()[i] = value;
        return t;
      };
      const Tensor x = random(dtype), dy = random(dtype), gamma = channel(1), beta = channel(0);
      Tensor y = Tensor::empty(shape, dtype, Layout::NHWC), dx = Tensor::empty(shape, dtype, Layout::NHWC);
      Tensor mean = channel(0), var = channel(1), running_mean = channel(0), running_var = channel(1);
      Tensor dgamma = channel(0), dbeta = channel(0);
      const double forward = bench::best_ms(
          [&] {
            b.batchnorm_relu_forward_training(x, gamma, beta, y, mean, var, running_mean, running_var, 0.1f, 1e-5f);
          },
          9);
      const double backward = bench::best_ms(
          [&] { b.batchnorm_relu_backward(x, y, dy, gamma, beta, mean, var, dx, dgamma, dbeta, 1e-5f); }, 9);
      std::printf("%3lld,%3lld,%3lld       %-5s %12.3f %12.3f\n", static_cast<long long>(s.batch),
                  static_cast<long long>(s.channels), static_cast<long long>(s.side), dtype_name(dtype), forward,
                  backward);
    }
  }
}
