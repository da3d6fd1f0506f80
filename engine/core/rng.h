// A seeded random number generator that gives the same numbers on every machine and compiler
// (xoshiro256** seeded by splitmix64; normals by Box-Muller, never the standard library's distributions).
#pragma once

#include <array>
#include <cstdint>
#include <utility>

namespace ampwb {

class Rng {
 public:
  explicit Rng(uint64_t seed = 0);

  uint64_t next_u64();
  double uniform();  // [0, 1)
  float uniform(float lo, float hi);
  double normal();                 // mean 0, standard deviation 1
  uint64_t below(uint64_t bound);  // [0, bound), unbiased

  template <class It>
  void shuffle(It first, It last) {  // Fisher-Yates
    for (auto n = last - first; n > 1; --n) std::swap(first[n - 1], first[below(n)]);
  }

  using State = std::array<uint64_t, 4>;
  State state() const { return s_; }
  void set_state(const State& s) { s_ = s; }

 private:
  State s_;
};

}  // namespace ampwb
