// Peak multiply-add loops in FP32 and BF16 (see the header).
#include "backend/cpu/multiply_add_rate.h"

#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

namespace ampwb {

namespace {

constexpr int kAccumulators = 12;  // enough independent chains to hide the multiply-add latency on two ports

// The sum of every lane of the accumulators, so that the loops cannot be optimised away.
template <class Vector>
float lane_sum(const Vector (&acc)[kAccumulators]) {
  float sum = 0;
  for (const Vector& a : acc) {
    float lanes[sizeof(Vector) / sizeof(float)];
    std::memcpy(lanes, &a, sizeof a);
    for (float v : lanes) sum += v;
  }
  return sum;
}

// 16 lanes x 2 flops an instruction.
[[gnu::target("avx512f")]] float fp32_fma_loop_avx512(long iterations) {
  __m512 acc[kAccumulators];
  for (auto& a : acc) a = _mm512_set1_ps(0.f);
  const __m512 x = _mm512_set1_ps(1.0001f), y = _mm512_set1_ps(0.9999f);
  for (long i = 0; i < iterations; ++i)
    for (auto& a : acc) a = _mm512_fmadd_ps(x, y, a);
  return lane_sum(acc);
}

// 8 lanes x 2 flops an instruction: the FP32 peak of a CPU without AVX-512 (first-generation Zen).
[[gnu::target("avx2,fma")]] float fp32_fma_loop_avx2(long iterations) {
  __m256 acc[kAccumulators];
  for (auto& a : acc) a = _mm256_set1_ps(0.f);
  const __m256 x = _mm256_set1_ps(1.0001f), y = _mm256_set1_ps(0.9999f);
  for (long i = 0; i < iterations; ++i)
    for (auto& a : acc) a = _mm256_fmadd_ps(x, y, a);
  return lane_sum(acc);
}

// 16 lanes x 2 products x 2 flops an instruction.
[[gnu::target("avx512f,avx512bf16")]] float bf16_dot_loop(long iterations) {
  __m512 acc[kAccumulators];
  for (auto& a : acc) a = _mm512_set1_ps(0.f);
  const __m512bh one = (__m512bh)_mm512_set1_epi16(0x3f80);
  for (long i = 0; i < iterations; ++i)
    for (auto& a : acc) a = _mm512_dpbf16_ps(a, one, one);
  return lane_sum(acc);
}

struct Loop {
  float (*run)(long);
  double flops_per_instruction;
};

// Null where the CPU has neither AVX-512 nor FMA.
Loop fp32_loop() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return {fp32_fma_loop_avx512, 32};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return {fp32_fma_loop_avx2, 16};
  return {nullptr, 0};
}

volatile float g_sink;  // keeps the loops' results alive

// GFLOP/s of `loop` run on `threads` threads at once.
double rate(const Loop& loop, int threads, long iterations) {
  if (!loop.run) return 0;
  std::vector<std::thread> workers;
  std::vector<float> sums(threads);
  const auto start = std::chrono::steady_clock::now();
  if (threads == 1) {
    sums[0] = loop.run(iterations);
  } else {
    for (int t = 0; t < threads; ++t) workers.emplace_back([&, t] { sums[t] = loop.run(iterations); });
    for (auto& w : workers) w.join();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  g_sink = sums[0];
  return threads * double(iterations) * kAccumulators * loop.flops_per_instruction / seconds / 1e9;
}

}  // namespace

bool cpu_has_avx512_bf16() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && (eax & (1u << 5));
}

MultiplyAddRates measure_multiply_add_rates(int threads, long iterations) {
  MultiplyAddRates rates;
  rates.fp32_gflops = rate(fp32_loop(), threads, iterations);
  if (cpu_has_avx512_bf16()) rates.bf16_gflops = rate({bf16_dot_loop, 64}, threads, iterations);
  return rates;
}

const MultiplyAddRates& one_core_multiply_add_rates() {
  static const MultiplyAddRates rates = [] {
    // 1.2 M VDPBF16PS take about 1 ms where they are slow; FMA gets five times the instructions so that both loops
    // run about as long and a clock ramp or a preemption weighs on each alike.
    constexpr long kIterations = 100'000;
    const bool bf16 = cpu_has_avx512_bf16();
    MultiplyAddRates best;
    for (int round = 0; round < 5; ++round) {
      best.fp32_gflops = std::max(best.fp32_gflops, rate(fp32_loop(), 1, 5 * kIterations));
      if (bf16) best.bf16_gflops = std::max(best.bf16_gflops, rate({bf16_dot_loop, 64}, 1, kIterations));
    }
    return best;
  }();
  return rates;
}

}  // namespace ampwb
