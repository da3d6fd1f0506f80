// How a run's numbers read for people, the same in every table, comparison and report of the CLI and the GUI:
// accuracies as percentages, durations, memory in MiB.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ampwb {

std::string percent_text(double fraction);           // 0.1234 -> "12.34%"; 2e-5 -> "<0.01%"; "-" when not finite
std::string duration_text(double seconds);           // "12.3 s", "4m05s", "1h02m"; "-" when not positive
std::string mebibytes_text(size_t bytes);            // "12.3 MiB"; "-" for 0 (not measured)
std::string fixed_text(double value, int digits);    // printf's %.*f: "0.1234"
std::string number_text(double value);               // shortest exact form: "65536", "0.2"; nan, inf, -inf
std::string significant_text(double value, int digits);  // printf's %.*g: "83.84", "0.001091"
std::string timestamp_text(const std::string& iso);  // "2026-11-21T17:16:10Z" -> "2026-11-21 17:16"
// A run's final loss scale: "65536", or where the run scales nothing (its scale stays 1, which says nothing),
// "none (no loss scaling)".
std::string loss_scale_text(double scale, bool scaled);
std::string runs_phrase(const std::vector<int64_t>& runs);  // "runs 1, 3 and 7", "run 4"

}  // namespace ampwb
