// JSON of the run's reports (RunInfo, StepReport, EpochReport, and the details of train/run_details.h) and of its
// status, from their field lists.
#include <nlohmann/json.hpp>

#include "train/events.h"
#include "train/record_json.h"
#include "train/run_details.h"

namespace ampwb {

void to_json(nlohmann::json& j, const RunInfo& info) { write_fields(j, info); }
void from_json(const nlohmann::json& j, RunInfo& info) { read_fields(j, info, "run information"); }
void to_json(nlohmann::json& j, const StepReport& step) { write_fields(j, step); }
void from_json(const nlohmann::json& j, StepReport& step) { read_fields(j, step, "step"); }
void to_json(nlohmann::json& j, const EpochReport& epoch) { write_fields(j, epoch); }
void from_json(const nlohmann::json& j, EpochReport& epoch) { read_fields(j, epoch, "epoch"); }

void to_json(nlohmann::json& j, const LayerNumerics& n) { write_fields(j, n); }
void from_json(const nlohmann::json& j, LayerNumerics& n) { read_fields(j, n, "layer numerics"); }
void to_json(nlohmann::json& j, const OverflowReport& o) { write_fields(j, o); }
void from_json(const nlohmann::json& j, OverflowReport& o) { read_fields(j, o, "overflow report"); }
void to_json(nlohmann::json& j, const EpochTimes& t) { write_fields(j, t); }
void from_json(const nlohmann::json& j, EpochTimes& t) { read_fields(j, t, "time breakdown"); }
void to_json(nlohmann::json& j, const AlternatingSpeed& a) { write_fields(j, a); }
void from_json(const nlohmann::json& j, AlternatingSpeed& a) { read_fields(j, a, "speed timed in alternation"); }
void to_json(nlohmann::json& j, const ConfusionMatrix& m) { write_fields(j, m); }
void from_json(const nlohmann::json& j, ConfusionMatrix& m) { read_fields(j, m, "confusion matrix"); }
void to_json(nlohmann::json& j, const LayerDivergence& l) { write_fields(j, l); }
void from_json(const nlohmann::json& j, LayerDivergence& l) { read_fields(j, l, "precision divergence"); }

void to_json(nlohmann::json& j, const PrecisionDivergence& d) {
  write_fields(j, d);
  j["layers"] = d.layers;
}

void from_json(const nlohmann::json& j, PrecisionDivergence& d) {
  constexpr const char* what = "precision divergence";
  read_fields(j, d, what);
  d.layers.clear();
  const auto layers = j.find("layers");
  if (layers == j.end()) return;
  if (!layers->is_array())
    throw Error(std::string("the stored ") + what + "'s layers is not a list: " + layers->dump());
  for (size_t i = 0; i < layers->size(); ++i) {
    const nlohmann::json& item = (*layers)[i];
    if (!item.is_object())
      throw Error(std::string("the stored ") + what + "'s layers[" + std::to_string(i) +
                  "] is not a record: " + item.dump());
    LayerDivergence l;
    read_fields(item, l, what, "layers[" + std::to_string(i) + "].");
    d.layers.push_back(std::move(l));
  }
}

void EpochTimes::divide_by_steps() {
  if (steps <= 0) return;
  const double n = static_cast<double>(steps);
  step_seconds /= n;
  data_wait_seconds /= n;
  communication_seconds /= n;
  communication_wait_seconds /= n;
  for (double& s : op_seconds) s /= n;
}

double EpochTimes::op_total_seconds() const {
  double total = 0;
  for (double s : op_seconds) total += s;
  return total;
}

void to_json(nlohmann::json& j, const RunStatus& status) { j = run_status_name(status); }
void from_json(const nlohmann::json& j, RunStatus& status) { status = parse_run_status(j.get<std::string>()); }

RunStatus parse_run_status(const std::string& name) {
  for (RunStatus s :
       {RunStatus::Running, RunStatus::Finished, RunStatus::Failed, RunStatus::Cancelled, RunStatus::Interrupted})
    if (name == run_status_name(s)) return s;
  throw Error("unknown run status '" + name + "'");
}

}  // namespace ampwb
