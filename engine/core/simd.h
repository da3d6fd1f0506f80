// Which vector instructions the engine's own kernels use, chosen at run time. Every kernel with vector paths
// has a scalar one that gives the same bits, so any level can be forced off (tests do, to check each path).
#pragma once

namespace ampwb {

enum class SimdLevel {
  Scalar = 0,  // plain C++
  Avx2 = 1,    // AVX2 + FMA + F16C (first-generation Zen and later)
  Avx512 = 2,  // AVX-512 F, BW, VL (Skylake-SP, Zen 4 and later)
};
const char* simd_level_name(SimdLevel level);  // "scalar", "avx2", "avx512"

// What this CPU has.
SimdLevel detected_simd_level();

// What kernels use: the detected level, capped by the environment (AMPWB_MAX_SIMD=scalar|avx2|avx512, and
// ONEDNN_MAX_CPU_ISA so that one variable makes the whole engine act as on an older CPU) and by set_simd_limit.
SimdLevel simd_level();

// Caps the level for the rest of the process (tests force each path in turn); returns the previous cap.
SimdLevel set_simd_limit(SimdLevel limit);

}  // namespace ampwb
