// Text as one word of a POSIX shell command line: for the commands the program prints for the user to paste and the
// scripts it writes. Single quotes keep every character as it is; a single quote inside is written '\''.
#pragma once

#include <string>

namespace ampwb {

// Always in single quotes: '/data/my runs.sqlite'.
inline std::string shell_quoted(const std::string& text) {
  std::string out = "'";
  for (const char ch : text) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

// As it is where no shell would read any of its characters specially (/usr/share/datasets/fashion-mnist), else
// quoted ('/tmp/my data').
inline std::string shell_word(const std::string& text) {
  const bool plain =
      !text.empty() && text.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
                                              "@%+=:,./_-") == std::string::npos;
  return plain ? text : shell_quoted(text);
}

}  // namespace ampwb
