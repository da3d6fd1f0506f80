#include "text_table.h"

#include <algorithm>
#include <cstdio>

#include "cli.h"
#include "core/display_width.h"

namespace ampwb::cli {
void Table::add(std::vector<std::string> row) {
  for (std::string& cell : row) cell = printable(cell);
  rows_.push_back(std::move(row));
}

void Table::print(const char* indent) const {
  std::vector<size_t> w;
  for (const auto& row : rows_)
    for (size_t i = 0; i < row.size(); ++i) {
      if (w.size() <= i) w.push_back(0);
      w[i] = std::max(w[i], display_width(row[i]));
    }
  for (const auto& row : rows_) {
    std::string line = indent;
    for (size_t i = 0; i < row.size(); ++i) {
      const std::string pad(w[i] - display_width(row[i]), ' ');
      const bool right = i < right_.size() && right_[i];
      line += right ? pad + row[i] : row[i] + (i + 1 < row.size() ? pad : "");
      if (i + 1 < row.size()) line += "  ";
    }
    line.erase(line.find_last_not_of(' ') + 1);  // a row whose last cells are empty ends with its last word
    std::printf("%s\n", line.c_str());
  }
}

void print_wrapped(const std::string& raw, const std::string& indent, const std::string& hanging, size_t columns) {
  const std::string text = printable(raw);  // as Table::add: stored text cannot break the terminal
  std::string line = indent;
  size_t used = display_width(indent), words = 0, at = 0;
  while (at < text.size()) {
    const size_t end = std::min(text.find(' ', at), text.size());
    const std::string word = text.substr(at, end - at);
    at = end + 1;
    if (word.empty()) continue;
    if (words > 0 && used + 1 + display_width(word) > columns) {
      std::printf("%s\n", line.c_str());
      line = hanging, used = display_width(hanging), words = 0;
    }
    if (words++ > 0) line += ' ', ++used;
    line += word, used += display_width(word);
  }
  std::printf("%s\n", line.c_str());
}

}  // namespace ampwb::cli
