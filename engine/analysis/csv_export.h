// CSV reports of stored runs, for spreadsheets and scripts: RFC 4180 (fields quoted when they hold a comma, quote,
// CR or LF; quotes doubled; CRLF line ends), UTF-8 as stored, units in the column names (seconds,
// images_per_second, peak_bytes), accuracies as fractions in [0, 1], numbers in their shortest exact form
// (a value read back equals the stored double), non-finite values as nan, inf, -inf. Text that a spreadsheet would
// take for a formula (a run named "=HYPERLINK(...)") is written as text: OWASP's guidance on CSV injection.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/atomic_file.h"
#include "store/run_store.h"

namespace ampwb {

// One CSV file, written whole or not at all (core/atomic_file.h): close() moves it into place, flushed to disk.
class CsvWriter {
 public:
  explicit CsvWriter(const std::string& path);  // throws StoreError naming the file
  ~CsvWriter();                                 // without close(), the partial file is removed
  CsvWriter& field(const std::string& text);    // text: names, tags, notes, paths (csv_text_cell)
  CsvWriter& field(const char* text) { return field(std::string(text)); }
  CsvWriter& field(double value);
  CsvWriter& field(int64_t value);
  CsvWriter& field(uint64_t value);
  CsvWriter& field(int value) { return field(static_cast<int64_t>(value)); }
  CsvWriter& number_or_text(const std::string& text);  // a setting's value: a number as written ("-4"), else text
  void end_row();
  void close();  // throws StoreError naming the file when it could not be written

 private:
  void put(std::string_view text);
  CsvWriter& cell(const std::string& quoted);

  std::optional<AtomicFile> file_;
  bool row_started_ = false;
};

std::string csv_quote(const std::string& field);  // the field as RFC 4180 writes it
// A text field as a spreadsheet must show it: one beginning with =, +, -, @, a tab or a carriage return (what
// spreadsheets read as a formula) gets a leading apostrophe, which they show as text; then RFC 4180's quoting.
std::string csv_text_cell(const std::string& text);
std::string csv_number(double value);  // shortest round-trip form; nan, inf, -inf

// Writes, into `folder` (created if needed): run-<id>-steps.csv, run-<id>-epochs.csv and run-<id>-summary.csv per
// run, runs-summary.csv (one row per run) and runs-long.csv (every epoch metric of every run, one value a row).
// A value not measured or not applicable is nan (a run that scales no loss has a loss scale of nan, as `show` says
// "-"); the summaries end with the machine's load while the run trained, then every setting but the name ("config.lr").
// Returns the files written.
std::vector<std::string> export_csv(const RunStore& store, const std::vector<int64_t>& runs, const std::string& folder);
// The files export_csv writes for `runs` into `folder`, in its order: what a caller may say it would replace.
std::vector<std::string> csv_export_files(const std::vector<int64_t>& runs, const std::string& folder);
// The other runs an earlier export left per-run files of in `folder` (ascending ids): an export of `runs` keeps them,
// but its runs-summary.csv and runs-long.csv list `runs` alone, which a user should be told.
std::vector<int64_t> runs_exported_before(const std::string& folder, const std::vector<int64_t>& runs);

}  // namespace ampwb
