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
  EXPECT_EQ(display_width("\xE6\xB7"), 1u);    // a cut-off character: one column, as the replacement shown
}

}  // namespace
}  // namespace ampwb
