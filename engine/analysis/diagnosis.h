// The diagnosis of a run (`ampwb explain`, the GUI's Diagnosis panel, the report): a short list of findings drawn
// from what the run recorded, each with its evidence (the numbers, the layer, the step) and the action to try.
// The rules read only stored records, so a run explains itself the same way while it trains, after it ended,
// and on another machine.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "store/run_record.h"
#include "store/run_store.h"
#include "train/record_fields.h"

namespace ampwb {

// Everything the store holds about one run.
struct RunEvidence {
  RunRecord run;
  std::vector<EpochReport> epochs;
  std::vector<StepReport> steps;
  std::vector<GradientHistogram> histograms;
  std::vector<LayerNumerics> layers;  // every probed step's layers
  std::vector<OverflowReport> overflows;
  std::vector<EpochTimes> times;
  std::vector<ConfusionMatrix> confusion;         // the validation set's, per epoch
  std::optional<PrecisionDivergence> divergence;  // measured at the end of a finished low-precision run
  std::optional<AlternatingSpeed> alternating;    // its sweep's timing in alternation, where one was run here
};
RunEvidence load_evidence(const RunStore& store, int64_t run);
// Only what a run's charts draw: its row, steps, epochs, histograms, layers and divergence (no overflows, times,
// confusion matrices or timing, which a damaged record there must not keep from being drawn).
RunEvidence load_charted_evidence(const RunStore& store, int64_t run);

enum class Severity { Problem, Warning, Note };  // the run is hurt; a risk; worth knowing
const char* severity_name(Severity s);           // "problem", "warning", "note"

struct Finding {
  std::string rule;  // a stable name: "data_bound", "scale_collapse", ...
  Severity severity = Severity::Note;
  std::string title;     // one line
  std::string evidence;  // the numbers behind it
  std::string action;    // what to try
};

template <class R, class V>
requires same_record<R, Finding>
void fields(R& f, V&& v) {
  v("rule", f.rule);
  v("severity", f.severity);
  v("title", f.title);
  v("evidence", f.evidence);
  v("action", f.action);
}
void to_json(nlohmann::json& j, const Finding& f);
void to_json(nlohmann::json& j, const Severity& s);
void from_json(const nlohmann::json& j, Severity& s);

// The share of a histogram's gradient values below FP16's smallest normal, 2^-14 (subnormal or zero in FP16).
double below_fp16_normal_share(const GradientHistogram& h);

// The rules' names, in the order findings are listed.
const std::vector<std::string>& diagnosis_rules();

// The findings for `run`, most serious first; with a baseline also why the run is (or is not) faster than it.
std::vector<Finding> diagnose(const RunEvidence& run, const RunEvidence* baseline = nullptr);

}  // namespace ampwb
