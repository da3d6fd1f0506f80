// The cores' peak multiply-add rates in FP32 (FMA) and in BF16 (AVX512-BF16's VDPBF16PS), measured by tight
// register-only loops. Whether BF16 pays on a CPU is a measured fact, not a flag: AVX512-BF16 doubles the FP32 rate
// on AMD Zen 5, but on an Intel Xeon (family 6 model 207) whose AMX tiles the hypervisor hides, VDPBF16PS ran at
// 0.49x FP32 FMA's rate and oneDNN's BF16 convolutions at 0.53-0.72x its FP32 ones (docs/benchmarks.md).
#pragma once

namespace ampwb {

struct MultiplyAddRates {
  double fp32_gflops = 0;  // FMA, AVX-512 where the CPU has it, else AVX2
  double bf16_gflops = 0;  // VDPBF16PS; 0 where the CPU has no AVX512-BF16
};

// Whether the CPU has AVX512-BF16 (CPUID leaf 7, sub-leaf 1, EAX bit 5), whatever oneDNN is capped to.
bool cpu_has_avx512_bf16();

// Each of `threads` threads runs each loop `iterations` times (12 independent multiply-adds an iteration): the
// rates of all threads together. A benchmark's measurement (bench/conv_dtypes.cpp).
MultiplyAddRates measure_multiply_add_rates(int threads, long iterations);

// One core's rates, measured once per process in a few milliseconds (the two loops alternated, best of five each,
// so a busy machine's preemptions drop out): what the CPU backend decides BF16's path by.
const MultiplyAddRates& one_core_multiply_add_rates();

}  // namespace ampwb
