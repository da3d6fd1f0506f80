// shell_word and shell_quoted against a real shell: what it reads back is the text, whatever the text holds.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "core/shell_word.h"

namespace ampwb {
namespace {

// What /bin/sh makes of `word` as the argument of printf %s.
std::string echoed(const std::string& word) {
  FILE* shell = popen(("printf %s " + word).c_str(), "r");
  std::string out;
  for (int c; (c = std::fgetc(shell)) != EOF;) out += static_cast<char>(c);
  pclose(shell);
  return out;
}

TEST(ShellWord, ReadsBackAsTheTextItQuotes) {
  for (const std::string text : {"/tmp/my data é", "it's", "a'b\"c$d`e\\f", "*", "x;rm -rf ~", "tab\there", "-"}) {
    EXPECT_EQ(echoed(shell_word(text)), text);
    EXPECT_EQ(echoed(shell_quoted(text)), text);
  }
  // A path no shell reads specially is printed as it is, readable in a hint.
  EXPECT_EQ(shell_word("/usr/share/datasets/fashion-mnist"), "/usr/share/datasets/fashion-mnist");
  EXPECT_EQ(shell_word("/tmp/walk1/ds2 é"), "'/tmp/walk1/ds2 é'");
  EXPECT_EQ(shell_word(""), "''");
}

}  // namespace
}  // namespace ampwb
