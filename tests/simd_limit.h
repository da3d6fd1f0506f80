// A cap on the engine's own vector code (core/simd.h) for one scope, and the SIMD levels this CPU has, for the tests
// that run every path in turn. The cap is restored however the scope ends: a program's tests can share one process
// (the sanitizer builds run each program once), and a cap left behind by a failed test would change the next ones.
#pragma once

#include <vector>

#include "core/simd.h"

namespace ampwb::test {

class SimdLimit {
 public:
  explicit SimdLimit(SimdLevel level) : previous_(set_simd_limit(level)) {}
  ~SimdLimit() { set_simd_limit(previous_); }
  SimdLimit(const SimdLimit&) = delete;
  SimdLimit& operator=(const SimdLimit&) = delete;

 private:
  SimdLevel previous_;
};

inline std::vector<SimdLevel> simd_levels_here() {
  std::vector<SimdLevel> levels;
  for (SimdLevel l : {SimdLevel::Scalar, SimdLevel::Avx2, SimdLevel::Avx512})
    if (l <= simd_level()) levels.push_back(l);  // what this CPU has, under any cap from the environment
  return levels;
}

}  // namespace ampwb::test
