// How much faster BF16 can be than FP32 on this CPU: the cores' peak multiply-add rate in each type, and the
// engine's own convolutions (oneDNN) on ResNet-18's shapes in each type, alternated round by round, medians.
// usage: ampwb_conv_dtypes [THREADS] [ROUNDS]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/multiply_add_rate.h"
#include "bench_util.h"
#include "core/rng.h"

namespace ampwb {
namespace {

using bench::Clock;
using bench::median;
using bench::seconds_since;

constexpr long kIterations = 50'000'000;

struct ConvShape {
  const char* name;
  int64_t N, C, H, K, R;
  int stride, padding;
};

Tensor random_tensor(Shape shape, DType dtype, Layout layout, Rng& rng) {
  std::vector<float> values(shape_numel(shape));
  for (float& v : values) v = rng.uniform(-1.f, 1.f);
  return tensor_from_floats(values, shape, dtype, layout);
}

struct ConvTimes {
  double forward, backward_data, backward_weights;
};

// Median seconds of each convolution pass over `reps` calls after one warm-up call.
ConvTimes time_conv(Backend& backend, const ConvShape& s, DType dtype, int reps) {
  Rng rng(1);
  const int64_t P = (s.H + 2 * s.padding - s.R) / s.stride + 1;
  const Layout act = Layout::NHWC, weights = Layout::NCHW;  // the engine's layouts
  Tensor x = random_tensor({s.N, s.C, s.H, s.H}, dtype, act, rng), dx = Tensor::empty(x.shape(), dtype, act);
  Tensor w = random_tensor({s.K, s.C, s.R, s.R}, dtype, weights, rng), dw = Tensor::empty(w.shape(), dtype, weights);
  Tensor dy = random_tensor({s.N, s.K, P, P}, dtype, act, rng), y = Tensor::empty(dy.shape(), dtype, act);
  const ConvParams p{s.stride, s.padding};
  auto time = [&](const std::function<void()>& pass) {
    pass();
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) {
      const auto start = Clock::now();
      pass();
      t.push_back(seconds_since(start));
    }
    return median(t);
  };
  return {time([&] { backend.conv2d_forward(x, w, y, p); }), time([&] { backend.conv2d_backward_data(dy, w, dx, p); }),
          time([&] { backend.conv2d_backward_weights(x, dy, dw, p); })};
}

int run(int threads, int rounds) {
  std::printf("peak multiply-add rate, %d threads:\n", threads);
  const MultiplyAddRates peak = measure_multiply_add_rates(threads, kIterations);
  std::printf("  FP32 FMA       %8.1f GFLOP/s (%s)\n", peak.fp32_gflops,
              __builtin_cpu_supports("avx512f") ? "AVX-512" : "AVX2");
  if (peak.bf16_gflops > 0)
    std::printf("  BF16 VDPBF16PS %8.1f GFLOP/s  (%.2fx FP32)\n", peak.bf16_gflops,
                peak.bf16_gflops / peak.fp32_gflops);
  else
    std::printf("  BF16: this CPU has no AVX512-BF16\n");

  auto backend =
      make_backend(DeviceChoice::cpu(), {threads, CpuBf16::Native});  // oneDNN's BF16 wherever it runs natively
  std::printf(
      "\n%s\nResNet-18 convolutions at 224 px, batch 16, NHWC; median of %d rounds, FP32 and BF16 "
      "alternated:\n",
      backend->description().c_str(), rounds);
  const ConvShape shapes[] = {{"stem 7x7 s2 3->64", 16, 3, 224, 64, 7, 2, 3},
                              {"3x3 64->64 @56", 16, 64, 56, 64, 3, 1, 1},
                              {"3x3 128->128 @28", 16, 128, 28, 128, 3, 1, 1},
                              {"3x3 256->256 @14", 16, 256, 14, 256, 3, 1, 1},
                              {"3x3 512->512 @7", 16, 512, 7, 512, 3, 1, 1}};
  std::printf("%-20s %-16s %10s %10s %8s\n", "shape", "pass", "FP32 GF/s", "BF16 GF/s", "BF16/FP32");
  for (const ConvShape& s : shapes) {
    const int64_t P = (s.H + 2 * s.padding - s.R) / s.stride + 1;
    const double flops = 2.0 * s.N * s.K * P * P * s.C * s.R * s.R;
    std::vector<double> f32[3], b16[3];
    for (int r = 0; r < rounds; ++r) {
      const ConvTimes a = time_conv(*backend, s, DType::F32, 3), b = time_conv(*backend, s, DType::BF16, 3);
      f32[0].push_back(a.forward), f32[1].push_back(a.backward_data), f32[2].push_back(a.backward_weights);
      b16[0].push_back(b.forward), b16[1].push_back(b.backward_data), b16[2].push_back(b.backward_weights);
    }
    const char* passes[] = {"forward", "backward data", "backward weights"};
    for (int k = 0; k < 3; ++k) {
      const double tf = median(f32[k]), tb = median(b16[k]);
      std::printf("%-20s %-16s %10.1f %10.1f %7.2fx\n", s.name, passes[k], flops / tf / 1e9, flops / tb / 1e9, tf / tb);
    }
  }

  // FP32 3x3 convolutions: oneDNN's direct ones against the engine's Winograd F(2x2,3x3) (backend/cpu/winograd.h),
  // alternated; GFLOP/s count the direct convolution's multiply-adds for both.
  auto direct = make_backend(DeviceChoice::cpu(), {threads, CpuBf16::Auto, false, ConvAlgorithm::Direct});
  auto winograd = make_backend(DeviceChoice::cpu(), {threads, CpuBf16::Auto, false, ConvAlgorithm::Winograd});
  std::printf("\nFP32, oneDNN's direct convolution against Winograd F(2x2,3x3), alternated:\n");
  std::printf("%-20s %-16s %10s %10s %8s\n", "shape", "pass", "direct", "Winograd", "speed-up");
  for (const ConvShape& s : shapes) {
    if (s.R != 3) continue;
    const double flops = 2.0 * s.N * s.K * s.H * s.H * s.C * 9;
    std::vector<double> d[3], w[3];
    for (int r = 0; r < rounds; ++r) {
      const ConvTimes a = time_conv(*direct, s, DType::F32, 3), b = time_conv(*winograd, s, DType::F32, 3);
      d[0].push_back(a.forward), d[1].push_back(a.backward_data), d[2].push_back(a.backward_weights);
      w[0].push_back(b.forward), w[1].push_back(b.backward_data), w[2].push_back(b.backward_weights);
    }
    const char* passes[] = {"forward", "backward data", "backward weights"};
    for (int k = 0; k < 3; ++k) {
      const double td = median(d[k]), tw = median(w[k]);
      std::printf("%-20s %-16s %10.1f %10.1f %7.2fx\n", s.name, passes[k], flops / td / 1e9, flops / tw / 1e9, td / tw);
    }
  }
  return 0;
}

}  // namespace
}  // namespace ampwb

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
  return ampwb::run(threads, rounds);
}
