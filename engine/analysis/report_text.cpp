// The text forms of a run's numbers (report_text.h).
#include "analysis/report_text.h"

#include <cmath>
#include <cstdio>

#include "train/record_json.h"

namespace ampwb {

std::string fixed_text(double value, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, value);
  return buf;
}

std::string number_text(double value) { return field_text(value); }

std::string significant_text(double value, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", digits, value);
  return buf;
}

std::string loss_scale_text(double scale, bool scaled) {
  return scaled ? number_text(scale) : "none (no loss scaling)";
}

std::string percent_text(double fraction) {
  if (!std::isfinite(fraction)) return "-";
  // A share too small for two decimals is still not none: one FP8 value clipped in 100,000 reads "<0.01%".
  if (fraction > 0 && fraction < 0.00005) return "<0.01%";
  return fixed_text(100 * fraction, 2) + "%";
}

std::string duration_text(double seconds) {
  if (!(seconds > 0)) return "-";
  if (seconds < 60) return fixed_text(seconds, 1) + " s";
  const long s = std::lround(seconds);
  char buf[32];
  if (s < 3600)
    std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
  return buf;
}

std::string mebibytes_text(size_t bytes) { return bytes ? fixed_text(bytes / 1048576.0, 1) + " MiB" : "-"; }

std::string timestamp_text(const std::string& iso) {
  return iso.size() >= 16 ? iso.substr(0, 10) + " " + iso.substr(11, 5) : iso;
}

std::string runs_phrase(const std::vector<int64_t>& runs) {
  std::string text = runs.size() == 1 ? "run " : "runs ";
  for (size_t i = 0; i < runs.size(); ++i) {
    if (i > 0) text += i + 1 == runs.size() ? " and " : ", ";
    text += std::to_string(runs[i]);
  }
  return text;
}

}  // namespace ampwb
