// What the engine's own AVX-512 kernels (direct_weight_gradient.cpp, stem_convolution.cpp) share: how threads split
// their work, and whether the CPU has AVX512-BF16.
#pragma once

#include <cstdint>
#include <utility>

namespace ampwb::cpu_detail {

// The share [first, last) of `total` that thread k of `threads` takes. (The kernels' thread loops stay outside
// their AVX-512 functions: clang outlines an OpenMP region without its function's target.)
inline std::pair<int64_t, int64_t> thread_share(int64_t total, int threads, int k) {
  return {total * k / threads, total * (k + 1) / threads};
}

inline bool cpu_has_avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
}

inline bool cpu_has_avx512_bf16() { return cpu_has_avx512() && __builtin_cpu_supports("avx512bf16"); }

}  // namespace ampwb::cpu_detail
