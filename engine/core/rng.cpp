// xoshiro256** (Blackman and Vigna), seeded with splitmix64.
#include "core/rng.h"

#include <cmath>
#include <numbers>

namespace ampwb {
namespace {
uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

Rng::Rng(uint64_t seed) {
  for (auto& word : s_) word = splitmix64(seed);
}

uint64_t Rng::next_u64() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1p-53; }

float Rng::uniform(float lo, float hi) { return lo + static_cast<float>(uniform()) * (hi - lo); }

double Rng::normal() {
  const double u1 = 1.0 - uniform();  // (0, 1]: log is finite
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

uint64_t Rng::below(uint64_t bound) {
  if (bound <= 1) return 0;
  const uint64_t limit = ~uint64_t{0} - (~uint64_t{0} % bound);  // reject the biased tail
  uint64_t x;
  do x = next_u64();
  while (x >= limit);
  return x % bound;
}

}  // namespace ampwb
