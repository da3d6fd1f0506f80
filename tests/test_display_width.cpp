// display_width against the columns Unicode's East Asian Width gives each character (UAX #11): W and F take two,
// combining and zero-width marks none, the rest one.
#include <gtest/gtest.h>

#include "core/display_width.h"

namespace ampwb {
namespace {

TEST(DisplayWidth, CountsTheColumnsATerminalGivesEachCharacter) {
  EXPECT_EQ(display_width(""), 0u);
  EXPECT_EQ(display_width("resnet20 amp-bf16"), 17u);
  EXPECT_EQ(display_width("chiens à poil"), 13u);  // Latin-1 letters: one column, two bytes
  EXPECT_EQ(display_width("Ошибка"), 6u);          // Cyrillic
  EXPECT_EQ(display_width("混合精度"), 8u);        // CJK ideographs (W)
  EXPECT_EQ(display_width("混合精度 fp16"), 13u);
  EXPECT_EQ(display_width("ねこ"), 4u);        // Hiragana (W)
  EXPECT_EQ(display_width("고양이"), 6u);      // Hangul syllables (W)
  EXPECT_EQ(display_width("（１）"), 6u);      // fullwidth forms (F)
  EXPECT_EQ(display_width("、。"), 4u);        // CJK punctuation (W)
  EXPECT_EQ(display_width("\U0001F431"), 2u);  // an emoji (W)
  EXPECT_EQ(display_width("\U00020000"), 2u);  // CJK Extension B, four bytes
  EXPECT_EQ(display_width("e\u0301"), 1u);     // e and a combining acute accent: one character shown
  EXPECT_EQ(display_width("a\u200Bb"), 2u);    // a zero-width space
  EXPECT_EQ(display_width("\U0001F680"), 2u);  // another emoji block
  EXPECT_EQ(display_width("\uFEFFab"), 2u);    // a byte-order mark: nothing shown
  EXPECT_EQ(display_width("\u1112\u1161\u11AB"), 2u);  // 한 decomposed (as macOS names files): one wide syllable
  // Bytes that are no UTF-8 (Latin-1 names, a cut sequence): one column a byte, as a terminal shows each.
  EXPECT_EQ(display_width("\xE6\xB7"), 2u);
  EXPECT_EQ(display_width("\xE6"
                          "a"),
            2u);
  EXPECT_EQ(display_width("\xE9t\xE9"), 3u);  // "été" in Latin-1
  EXPECT_EQ(display_width("\xC0\x80"), 2u);   // an overlong NUL: never a character
}

}  // namespace
}  // namespace ampwb
