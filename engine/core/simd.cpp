// Run-time choice of the engine's vector paths: CPU detection and the caps from the environment and tests.
#include "core/simd.h"

#include <cpuid.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>

namespace ampwb {

namespace {

// The cap named by an environment variable; Avx512 (no cap) when unset or unknown.
SimdLevel cap_from_environment() {
  SimdLevel cap = SimdLevel::Avx512;
  if (const char* v = std::getenv("AMPWB_MAX_SIMD")) {
    const std::string s(v);
    if (s == "scalar") cap = std::min(cap, SimdLevel::Scalar);
    if (s == "avx2") cap = std::min(cap, SimdLevel::Avx2);
  }
  if (const char* v = std::getenv("ONEDNN_MAX_CPU_ISA")) {
    std::string s(v);
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
    if (s.rfind("AVX2", 0) == 0) cap = std::min(cap, SimdLevel::Avx2);
    if (s == "SSE41" || s == "AVX") cap = std::min(cap, SimdLevel::Scalar);
  }
  return cap;
}

std::atomic<SimdLevel> g_limit{SimdLevel::Avx512};

}  // namespace

const char* simd_level_name(SimdLevel level) {
  switch (level) {
    case SimdLevel::Scalar:
      return "scalar";
    case SimdLevel::Avx2:
      return "avx2";
    case SimdLevel::Avx512:
      return "avx512";
  }
  return "?";
}

SimdLevel detected_simd_level() {
  static const SimdLevel level = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
      return SimdLevel::Avx512;
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);  // clang 14 cannot name it
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c) return SimdLevel::Avx2;
    return SimdLevel::Scalar;
  }();
  return level;
}

SimdLevel simd_level() {
  static const SimdLevel environment_cap = cap_from_environment();
  return std::min({detected_simd_level(), environment_cap, g_limit.load(std::memory_order_relaxed)});
}

SimdLevel set_simd_limit(SimdLevel limit) { return g_limit.exchange(limit); }

}  // namespace ampwb
