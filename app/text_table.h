// A plain text table for the CLI's listings: columns padded to their widest cell, numbers right-aligned; and
// paragraphs wrapped to a terminal's width.
#pragma once

#include <string>
#include <vector>

namespace ampwb::cli {

class Table {
 public:
  // `right`: per column, whether its cells align right (numbers).
  explicit Table(std::vector<std::string> header, std::vector<bool> right = {})
      : rows_{std::move(header)}, right_(std::move(right)) {}
  // Control characters shown as escapes: a name stored before they were refused cannot break the table.
  void add(std::vector<std::string> row);
  size_t rows() const { return rows_.size() - 1; }  // without the header
  void print(const char* indent = "") const;

 private:
  std::vector<std::vector<std::string>> rows_;
  std::vector<bool> right_;
};

// Prints `text` wrapped at word boundaries to lines of at most `columns` (a longer word stands alone): the first
// line after `indent`, the others after `hanging`.
void print_wrapped(const std::string& text, const std::string& indent, const std::string& hanging,
                   size_t columns = 100);

}  // namespace ampwb::cli
