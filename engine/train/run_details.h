// What a run reports beyond its curves, for explaining it: per-layer numerics, the layers behind each
// skipped step, where each epoch's step time went, each epoch's validation confusion matrix, and the run's precision
// divergence from FP32 at its end (amp/precision_divergence.h). Value types with their
// field lists (train/record_fields.h); the run store keeps each as JSON (store/run_store.h).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "amp/layer_numerics.h"
#include "amp/precision_divergence.h"
#include "backend/profiled_backend.h"
#include "train/machine_load.h"
#include "train/record_fields.h"

namespace ampwb {

// A skipped step's forensics: which layers' weight gradients held inf or NaN.
struct OverflowReport {
  int epoch = 0;
  int64_t step = 0;                 // global
  double loss_scale = 1;            // the scale the step used (it backs off after)
  std::vector<std::string> layers;  // in backward order: the first named is nearest the loss, where it started
  int64_t nonfinite_values = 0;     // inf and NaN gradient values
  double finite_grad_norm = 0;      // L2 norm of the finite gradient values, unscaled (the whole norm is inf/NaN)
};

constexpr size_t kTimeClassCount = static_cast<size_t>(TimeClass::Count);

// One epoch's training step time by class, from the backend's own timers (ProfiledBackend), per step.
struct EpochTimes {
  int epoch = 0;
  int64_t steps = 0;                                 // steps timed
  double step_seconds = 0;                           // wall time of a step, the wait for its data included
  double data_wait_seconds = 0;                      // waiting for the loader, per step
  std::array<double, kTimeClassCount> op_seconds{};  // by TimeClass, per step
  // Many processes, per step: the gradients' all-reduce on its communication thread, beside backward (a share of
  // it hidden by backward, not a part of the step's time); and the trainer's thread waiting for it after backward.
  double communication_seconds = 0;
  double communication_wait_seconds = 0;
  // Per step, over every step of the epoch (timed or not): the times it waited for its device to finish all the
  // work queued (ProfiledBackend::host_waits). 1 where each step reads its numbers; 0 with deferred steps.
  double host_waits = 0;
  // Over every step of the epoch: the share replayed as captured work (a CUDA graph, --cuda-graphs); and where
  // capture was asked but the steps ran op by op, the backend's reason.
  double replayed = 0;
  std::string why_not_captured;
  MachineLoad load;  // what else the machine did during the epoch's training steps

  double op_total_seconds() const;
  // The times summed over the steps turned into per-step means (left as they are when no step was timed).
  void divide_by_steps();
  // What no class holds: the host's own work between ops. Small when the classes tell the whole story.
  double other_seconds() const {
    return step_seconds - data_wait_seconds - communication_wait_seconds - op_total_seconds();
  }
};

// A sweep's speeds timed in alternation after its trainings (train/alternating_benchmark.h), kept with each of
// its runs: the speed-up of any two of them is the ratio of their rounds (analysis/run_speed.h).
struct AlternatingSpeed {
  std::vector<int64_t> runs;                           // the sweep's runs
  std::vector<std::vector<double>> images_per_second;  // [run][round]
  int64_t steps_per_round = 0;                         // timed steps of each configuration a round
  std::string data;                                    // what the steps trained on: "synthetic 16 px images, batch 8"
  MachineLoad load;                                    // the machine's other work while they were timed
};

// The validation set's confusion matrix at the end of an epoch.
struct ConfusionMatrix {
  int epoch = 0;
  int64_t classes = 0;
  std::vector<int64_t> counts;  // classes x classes: counts[true_class * classes + predicted_class]
};

template <class R, class V>
requires same_record<R, ValueRange>
void fields(R& r, V&& v) {
  v("count", r.count);
  v("max_abs", r.max_abs);
  v("underflow_fraction", r.underflow_fraction);
  v("overflow_fraction", r.overflow_fraction);
  v("zero_fraction", r.zero_fraction);
  v("nonfinite_fraction", r.nonfinite_fraction);
  v("below_normal_fraction", r.below_normal_fraction);  // absent before it was measured: 0
}

template <class R, class V>
requires same_record<R, Fp8TensorNumerics>
void fields(R& r, V&& v) {
  v("scale", r.scale);
  v("amax", r.amax);
  v("format_max", r.format_max);
  v("count", r.count);
  v("saturated_fraction", r.saturated_fraction);
  v("underflow_fraction", r.underflow_fraction);
}

template <class R, class V>
requires same_record<R, LayerNumerics>
void fields(R& n, V&& v) {
  v("epoch", n.epoch);
  v("step", n.step);
  v("layer", n.layer);
  v("kind", n.kind);
  v("in_channels", n.in_channels);
  v("out_channels", n.out_channels);
  v("forward_dtype", n.forward_dtype);
  v("backward_dtype", n.backward_dtype);
  v("casts", n.casts);
  v("loss_scale", n.loss_scale);
  v("activation", n.activation);
  v("activation_grad", n.activation_grad);
  v("weight_grad", n.weight_grad);
  v("fp8_input", n.fp8_input);  // absent where the run had no FP8: count 0
  v("fp8_weight", n.fp8_weight);
  v("fp8_output_grad", n.fp8_output_grad);
}

template <class R, class V>
requires same_record<R, OverflowReport>
void fields(R& o, V&& v) {
  v("epoch", o.epoch);
  v("step", o.step);
  v("loss_scale", o.loss_scale);
  v("layers", o.layers);
  v("nonfinite_values", o.nonfinite_values);
  v("finite_grad_norm", o.finite_grad_norm);
}

template <class R, class V>
requires same_record<R, EpochTimes>
void fields(R& t, V&& v) {
  v("epoch", t.epoch);
  v("steps", t.steps);
  v("step_seconds", t.step_seconds);
  v("data_wait_seconds", t.data_wait_seconds);
  for (size_t i = 0; i < kTimeClassCount; ++i) v(time_class_name(static_cast<TimeClass>(i)), t.op_seconds[i]);
  v("host_waits", t.host_waits);  // absent before 2026-11-25: 0
  v("replayed", t.replayed);      // absent before 2026-11-26: 0
  v("why_not_captured", t.why_not_captured);
  v("load", t.load);                                              // absent before 2026-12-01: not recorded
  v("communication_seconds", t.communication_seconds);            // absent before 2026-12-02: 0
  v("communication_wait_seconds", t.communication_wait_seconds);  // absent before 2026-12-02: 0
}

template <class R, class V>
requires same_record<R, AlternatingSpeed>
void fields(R& a, V&& v) {
  v("runs", a.runs);
  v("images_per_second", a.images_per_second);
  v("steps_per_round", a.steps_per_round);
  v("data", a.data);
  v("load", a.load);  // absent before 2026-12-06: not recorded
}

template <class R, class V>
requires same_record<R, ConfusionMatrix>
void fields(R& m, V&& v) {
  v("epoch", m.epoch);
  v("classes", m.classes);
  v("counts", m.counts);
}

template <class R, class V>
requires same_record<R, TensorDivergence>
void fields(R& t, V&& v) {
  v("relative_error", t.relative_error);
  v("reference_norm", t.reference_norm);
  v("nonfinite", t.nonfinite);
  v("norm", t.norm);
}

template <class R, class V>
requires same_record<R, LayerDivergence>
void fields(R& l, V&& v) {
  v("layer", l.layer);
  v("kind", l.kind);
  v("forward_dtype", l.forward_dtype);
  v("activation", l.activation);
  v("activation_grad", l.activation_grad);
  v("weight_grad", l.weight_grad);
}

// The layers are a list of records, which the field-list facility does not visit: PrecisionDivergence's JSON
// writes and reads them itself (train/records_json.cpp).
template <class R, class V>
requires same_record<R, PrecisionDivergence>
void fields(R& d, V&& v) {
  v("epoch", d.epoch);
  v("step", d.step);
  v("mode", d.mode);
  v("format", d.format);
  v("samples", d.samples);
  v("loss_scale", d.loss_scale);
  v("unit_roundoff", d.unit_roundoff);
  v("threshold", d.threshold);
  v("loss", d.loss);
  v("first_departing", d.first_departing);
  v("largest_growth", d.largest_growth);
  v("largest_growth_factor", d.largest_growth_factor);
}

void to_json(nlohmann::json& j, const LayerNumerics& n);
void from_json(const nlohmann::json& j, LayerNumerics& n);
void to_json(nlohmann::json& j, const OverflowReport& o);
void from_json(const nlohmann::json& j, OverflowReport& o);
void to_json(nlohmann::json& j, const EpochTimes& t);
void from_json(const nlohmann::json& j, EpochTimes& t);
void to_json(nlohmann::json& j, const AlternatingSpeed& a);
void from_json(const nlohmann::json& j, AlternatingSpeed& a);
void to_json(nlohmann::json& j, const ConfusionMatrix& m);
void from_json(const nlohmann::json& j, ConfusionMatrix& m);
void to_json(nlohmann::json& j, const LayerDivergence& l);
void from_json(const nlohmann::json& j, LayerDivergence& l);
void to_json(nlohmann::json& j, const PrecisionDivergence& d);
void from_json(const nlohmann::json& j, PrecisionDivergence& d);

}  // namespace ampwb
