// Texts of the precision divergence for the CLI, the report and the GUI.
#include "analysis/divergence_text.h"

#include <cmath>
#include <cstdio>

#include "train/config.h"

namespace ampwb {

std::string divergence_absence(const RunRecord& run) {
  const std::string mode = mode_name(run.config.precision.mode);
  if (run.config.precision.mode == PrecisionMode::Fp32)
    return mode + " computes in FP32: the run is its own reference, there is nothing to compare.";
  if (run.config.precision.mode == PrecisionMode::Tf32)
    return "not measured for tf32: it differs from FP32 in the GPU's math, not in dtypes.";
  if (run.status != RunStatus::Finished)
    return "not measured: the divergence is measured once, at the end of a finished run.";
  return "not recorded (a run recorded before ampwb measured it).";
}

std::string divergence_layer_note(const PrecisionDivergence& d, const LayerDivergence& layer) {
  std::string note;
  if (layer.layer == d.first_departing) note = "first departure";
  if (layer.layer == d.largest_growth) {
    char growth[64];
    std::snprintf(growth, sizeof growth, "largest growth (%.1fx)", d.largest_growth_factor);
    note += (note.empty() ? "" : ", ") + std::string(growth);
  }
  return note;
}

std::string divergence_threshold_text(const PrecisionDivergence& d) {
  std::string format = d.format;
  for (char& c : format) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  char buf[128];
  std::snprintf(buf, sizeof buf, "%.0f units of %s rounding (u = 2^%d): %.2e", kDepartureUnits, format.c_str(),
                static_cast<int>(std::lround(std::log2(d.unit_roundoff > 0 ? d.unit_roundoff : 1))), d.threshold);
  return buf;
}

}  // namespace ampwb
