// The engine's hash (core/hash.h) gives fixed values for fixed inputs, on every machine and compiler: its values
// are on disk (cache names, fingerprints) and seed the validation split, so these golden values must never change.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/hash.h"

namespace ampwb {
namespace {

// The golden values were computed by an independent Python implementation (arbitrary-precision integers, masks to
// 64 bits) of the algorithm as it stood in data/cache_store.cpp before it moved to core/hash.cpp.
TEST(Hash, HasherGivesTheSameValuesEverywhere) {
  EXPECT_EQ(Hasher().digest(), 0x9ca066f1a4ab2eeaull);
  EXPECT_EQ(Hasher().hex(), "9ca066f1a4ab2eea");

  Hasher text;
  text.add(std::string("abc"));  // the length, then the bytes
  EXPECT_EQ(text.digest(), 0xdaac2e53d55e2630ull);

  Hasher number;
  number.add_u64(42);
  EXPECT_EQ(number.digest(), 0x805bcced3ef03922ull);

  Hasher raw;
  raw.add("hello, world", 12);  // one full word and a 4-byte tail
  EXPECT_EQ(raw.hex(), "a92ca9d37ae510fe");

  std::vector<uint8_t> pattern(1000);
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<uint8_t>((i * 31 + 7) % 256);
  Hasher whole;
  whole.add(pattern.data(), pattern.size());
  EXPECT_EQ(whole.digest(), 0x0637408436475cd9ull);
  Hasher halves;  // each add() pads its own tail: the split is part of the input
  halves.add(pattern.data(), 500);
  halves.add(pattern.data() + 500, 500);
  EXPECT_EQ(halves.digest(), 0x398aa463433dc27full);
}

TEST(Hash, HasherTellsApartWhatItShould) {
  auto of = [](const std::string& a, const std::string& b) {
    Hasher h;
    h.add(a);
    h.add(b);
    return h.digest();
  };
  EXPECT_NE(of("ab", "c"), of("a", "bc"));  // strings carry their length
  EXPECT_EQ(of("ab", "c"), of("ab", "c"));
  Hasher zero, none;
  zero.add("\0", 1);
  EXPECT_NE(zero.digest(), none.digest());  // a zero byte is not nothing: the length is mixed in
  EXPECT_EQ(Hasher::hex64(0xabcull), "0000000000000abc");
}

TEST(Hash, Fnv1aMatchesTheReferenceVectors) {
  // From the FNV reference (Fowler, Noll, Vo: isthe.com/chongo/tech/comp/fnv): FNV-1a 64 of "", "a", "foobar".
  EXPECT_EQ(Fnv1a64().digest(), 0xcbf29ce484222325ull);
  Fnv1a64 a;
  a.add("a", 1);
  EXPECT_EQ(a.hex(), "af63dc4c8601ec8c");
  Fnv1a64 foobar;
  foobar.add("foo", 3);  // byte-wise: any split gives the same value
  foobar.add("bar", 3);
  EXPECT_EQ(foobar.digest(), 0x85944171f73967e8ull);
  Fnv1a64 number, bytes;
  number.add_u64(0x0102030405060708ull);
  const uint8_t little_endian[8] = {8, 7, 6, 5, 4, 3, 2, 1};
  bytes.add(little_endian, 8);
  EXPECT_EQ(number.digest(), bytes.digest());
}

}  // namespace
}  // namespace ampwb
