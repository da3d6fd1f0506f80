// The diagnosis rules. Each reads the run's records, and when its condition holds adds one finding with the
// numbers that made it fire. Thresholds are named here, with why they sit where they do.
#include "analysis/diagnosis.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>

#include "analysis/numerics_grid.h"
#include "analysis/run_speed.h"
#include "analysis/time_comparison.h"
#include "core/half.h"
#include "train/record_json.h"
#include "train/scale_collapse.h"

namespace ampwb {
namespace {

// A step that waits for its data this much of its time is bound by the input pipeline, not the arithmetic.
constexpr double kDataBoundShare = 0.25;
// Skipped steps up to this share of the run are the dynamic scaler probing a higher scale: expected.
constexpr double kRoutineSkipShare = 0.01;
// Gradients with FP16 storage and no loss scaling: a share this large below FP16's smallest normal (2^-14, where
// it starts losing bits, down to 2^-24 where it loses everything) is gradient signal being lost.
constexpr double kUnderflowShare = 0.01;
// An activation within this many powers of two of FP16's largest value is one bad batch from inf.
constexpr double kHeadroomPowersOfTwo = 2.0;
// Per-step costs that do not grow with the batch (optimizer, scale check, host work between ops): above this share
// of the compute the batch is too small to amortise them. (ResNet-20 at 16 px on the Zen 1 machine: 2% at batch 32,
// 6% at batch 8, 19% at batch 2 and 8 px.)
constexpr double kFixedCostShare = 0.12;
// An FP8 tensor whose cast makes this share of its nonzero values zero: the format's range, below the scaled amax,
// does not reach them (E4M3: 2^17.8 from 448 down to 2^-9).
constexpr double kFp8UnderflowShare = 0.05;
// A model that gives one class this share of its validation answers or more answers by that class, not by the image
// (unless the class itself is nearly all of the split: kOneClassTrueShare).
constexpr double kOneClassAnswerShare = 0.95;
constexpr double kOneClassTrueShare = 0.8;
constexpr int64_t kOneClassMinImages = 10;  // fewer say too little
// An FP32 baseline this many points of accuracy above such a run learned what it did not.
constexpr double kOneClassLearnedMargin = 0.1;
// A speed-up under this is no speed-up worth AMP's numerical risk.
constexpr double kWorthwhileSpeedup = 1.1;

std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* fmt, ...) {
  char buf[512];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, args);
  va_end(args);
  return buf;
}

std::string percent(double fraction) {  // two digits under 1%, so that no share past a rule's threshold reads 0%
  return format(fraction < 0.01 && fraction > 0 ? "%.2g%%" : "%.0f%%", 100 * fraction);
}
std::string ms(double seconds) { return format(seconds < 0.01 ? "%.2f ms" : "%.1f ms", seconds * 1e3); }

NumberFormat format_of(const RunEvidence& e) { return mode_info(e.run.config.precision.mode).format; }
bool fp16_storage(const RunEvidence& e) { return format_of(e) == NumberFormat::Fp16; }
bool low_precision(const RunEvidence& e) { return mode_info(e.run.config.precision.mode).low != DType::F32; }
bool on_cpu(const RunEvidence& e) { return e.run.device.is_cpu(); }
std::string mode_of(const RunEvidence& e) { return mode_name(e.run.config.precision.mode); }

// The precision settings besides the mode in which two runs trained differently ("precision.fp8.formats,
// precision.fp8.first_and_last"); empty where none.
std::string precision_settings_difference(const RunEvidence& e, const RunEvidence& base) {
  const auto a = config_settings(effective_config(e.run.config)),
             b = config_settings(effective_config(base.run.config));
  std::string out;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    if (a[i].first.starts_with("precision.") && a[i].first != "precision.mode" && a[i] != b[i])
      out += (out.empty() ? "" : ", ") + a[i].first;
  return out;
}

int64_t skipped_count(const RunEvidence& e) {
  return std::count_if(e.steps.begin(), e.steps.end(), [](const StepReport& s) { return s.skipped; });
}

RunTiming timing_of(const RunEvidence& e) {
  return {e.times, measure_speed(e.steps, e.run.global_batch_size(), e.run.config.numerics_every)};
}

void add(std::vector<Finding>& out, const char* rule, Severity severity, std::string title, std::string evidence,
         std::string action) {
  out.push_back({rule, severity, std::move(title), std::move(evidence), std::move(action)});
}

// --- the rules ---

// A run that did not train to its end: every other finding covers only the epochs it completed.
void unfinished(const RunEvidence& e, std::vector<Finding>& out) {
  const RunRecord& r = e.run;
  if (r.status == RunStatus::Finished) return;
  const std::string done = std::to_string(e.epochs.size()) + " of " + std::to_string(r.epochs) + " epochs";
  std::string evidence = "status " + run_state_words(r) + ", " + done + " completed, " +
                         std::to_string(e.steps.size()) + " steps recorded";
  if (!r.end_reason.empty()) evidence += "; " + r.end_reason;
  if (r.status == RunStatus::Running) {
    add(out, "unfinished", Severity::Note, (is_paused(r) ? "Paused: " : "Still training: ") + done + " so far",
        evidence, "the findings cover what it has recorded: explain it again when it has ended");
  } else if (r.status == RunStatus::Failed) {
    add(out, "unfinished", Severity::Problem, "Failed after " + done, evidence,
        "the other findings cover what it trained before it failed; fix what the reason names and train it again");
  } else {
    add(out, "unfinished", Severity::Note,
        std::string(r.status == RunStatus::Cancelled ? "Stopped" : "Interrupted") + " after " + done, evidence,
        "the findings cover only what it trained: resume it from its last checkpoint, where it has one, to see the "
        "rest");
  }
}

// Its accuracy, the share of the split in that class, reads like a result; the confusion matrix says it is none.
// Against an FP32 baseline that learned, the precision is the suspect.
void one_class(const RunEvidence& e, const RunEvidence* baseline, std::vector<Finding>& out) {
  if (e.confusion.empty()) return;
  const ConfusionMatrix& m = e.confusion.back();  // the last validated epoch's
  const auto n = static_cast<size_t>(m.classes);
  if (n < 2 || m.counts.size() != n * n) return;
  std::vector<int64_t> answered(n, 0), truly(n, 0);
  for (size_t t = 0; t < n; ++t)
    for (size_t p = 0; p < n; ++p) answered[p] += m.counts[t * n + p], truly[t] += m.counts[t * n + p];
  const int64_t images = std::accumulate(truly.begin(), truly.end(), int64_t{0});
  int64_t correct = 0;
  for (size_t c = 0; c < n; ++c) correct += m.counts[c * n + c];
  const auto top = static_cast<size_t>(std::max_element(answered.begin(), answered.end()) - answered.begin());
  const double share = images ? static_cast<double>(answered[top]) / images : 0;
  const double true_share = images ? static_cast<double>(truly[top]) / images : 0;
  if (images < kOneClassMinImages || share < kOneClassAnswerShare || true_share > kOneClassTrueShare) return;
  const std::vector<std::string>& names = e.run.info.class_names;
  const std::string name = top < names.size() ? "'" + names[top] + "'" : "class " + std::to_string(top);
  const double fp32_best =
      baseline && low_precision(e) && mode_info(baseline->run.config.precision.mode).format == NumberFormat::Fp32
          ? summarize(baseline->run, baseline->epochs).best_validation_accuracy
          : 0;
  const bool fp32_learned =  // NaN (no validation) is no
      fp32_best > static_cast<double>(correct) / static_cast<double>(images) + kOneClassLearnedMargin;
  add(out, "one_class", Severity::Problem,
      std::string("The model answers ") + name + (share < 1 ? " for nearly every image" : " for every image") +
          ": it has not learned to tell the classes apart",
      format("epoch %d: %s for %lld of %lld validation images, whose share of them is %s; the validation accuracy of "
             "%s is %sthat share, not a result",
             m.epoch, name.c_str(), static_cast<long long>(answered[top]), static_cast<long long>(images),
             percent(true_share).c_str(), percent(static_cast<double>(correct) / images).c_str(),
             share < 1 ? "about " : ""),
      fp32_learned ? format("the FP32 baseline, run %lld, learned (%s): where their other settings match (ampwb "
                            "compare %lld %lld), the precision is at fault, and the findings on its numerics say where",
                            static_cast<long long>(baseline->run.id), percent(fp32_best).c_str(),
                            static_cast<long long>(baseline->run.id), static_cast<long long>(e.run.id))
                   : std::string("train more epochs or with another learning rate, and check that the classes' "
                                 "images differ") +
                         (low_precision(e) ? "; where an FP32 run of the same settings learns and this one does not, "
                                             "the precision is at fault"
                                           : ""));
}

void data_bound(const RunEvidence& e, std::vector<Finding>& out) {
  double wait = 0, step = 0;
  std::string where;
  if (const EpochTimes t = split_median_step(timing_of(e)); t.steps > 0) {
    wait = t.data_wait_seconds, step = t.step_seconds;
    where = "per step, from the time breakdown";
  } else {
    for (const EpochReport& ep : e.epochs)
      wait += ep.data_wait_seconds, step += ep.data_wait_seconds + ep.compute_seconds;
    where = "over the run's epochs";
  }
  if (step <= 0 || wait / step < kDataBoundShare) return;
  add(out, "data_bound", Severity::Problem, "The step waits for its data: the input pipeline sets the speed",
      "the loader kept training waiting " + ms(wait) + " of " + ms(step) + " (" + percent(wait / step) + ", " + where +
          ")",
      "AMP speeds up arithmetic, not image decoding: give the loader more threads, keep more decoded images in "
      "memory (a larger image cache), or train on smaller images");
}

void fp16_emulated(const RunEvidence& e, std::vector<Finding>& out) {
  if (!fp16_storage(e) || !on_cpu(e)) return;
  add(out, "fp16_emulated", Severity::Note, "FP16 is emulated on this CPU: its arithmetic is FP32's",
      e.run.info.compute.empty() ? "the run trained " + mode_of(e) + " on the CPU" : e.run.info.compute,
      "use this run for FP16's numerics (range, underflow, loss scaling); for speed on a CPU use amp-bf16 where "
      "the CPU computes BF16 faster than FP32 (AMX, or AVX512-BF16 as on AMD Zen 5), or train FP16 on a GPU");
}

void fp8_emulated(const RunEvidence& e, std::vector<Finding>& out) {
  if (format_of(e) != NumberFormat::Fp8 || !on_cpu(e)) return;
  add(out, "fp8_emulated", Severity::Note,
      "FP8 is emulated on this CPU: FP32 arithmetic on values rounded to FP8, plus the conversions",
      e.run.info.compute.empty() ? "the run trained " + mode_of(e) + " on the CPU" : e.run.info.compute,
      "use this run for FP8's numerics (each tensor's scale, saturation and underflow, layer by layer); FP8 computes "
      "faster only on GPUs with FP8 tensor cores (NVIDIA's since Ada and Hopper)");
}

void bf16_not_native(const RunEvidence& e, std::vector<Finding>& out) {
  if (format_of(e) != NumberFormat::Bf16 || !on_cpu(e)) return;
  if (e.run.info.compute.find("emulated") == std::string::npos) return;
  add(out, "bf16_not_native", Severity::Warning, "BF16 without native support: no faster arithmetic to expect here",
      e.run.info.compute,
      "BF16 pays on CPUs whose BF16 multiply-adds outpace FP32's: AVX512-BF16 on AMD Zen 5 (about 2x) or AMX (far "
      "more); on this CPU train fp32 for speed, and amp-bf16 only to study its numerics");
}

// The skips with which the scaler halved an initial scale that was too high, where they were as many as a collapse's:
// the run's first steps, which trained nothing.
const SkippedRun* initial_level_search(const std::vector<SkippedRun>& runs) {
  return !runs.empty() && runs.front().from_initial_scale() && runs.front().length >= kScaleCollapseRun ? &runs.front()
                                                                                                        : nullptr;
}

void initial_scale(const SkippedRun* search, std::vector<Finding>& out) {
  if (!search) return;
  add(out, "initial_scale_too_high", Severity::Warning,
      "The initial loss scale was too high: the first steps trained nothing", initial_scale_too_high(*search),
      initial_scale_advice(*search));
}

// The skips beyond an initial level search (initial_scale_too_high says those).
void skipped_steps(const RunEvidence& e, const SkippedRun* search, std::vector<Finding>& out) {
  const int64_t after = search ? search->last_step : -1;
  const auto later = [&](const StepReport& s) { return s.step > after; };
  const int64_t steps = std::count_if(e.steps.begin(), e.steps.end(), later);
  const int64_t skipped =
      std::count_if(e.steps.begin(), e.steps.end(), [&](const StepReport& s) { return s.skipped && later(s); });
  if (skipped == 0) return;
  const double share = static_cast<double>(skipped) / static_cast<double>(steps);
  const auto first =
      std::find_if(e.steps.begin(), e.steps.end(), [&](const StepReport& s) { return s.skipped && later(s); });
  std::string evidence = format("%lld of %lld steps skipped (%s), the first at step %lld with loss scale %g",
                                static_cast<long long>(skipped), static_cast<long long>(steps), percent(share).c_str(),
                                static_cast<long long>(first->step), static_cast<double>(first->loss_scale));
  if (search)
    evidence += format(" (after the first %lld, the initial scale's)", static_cast<long long>(search->length));
  std::vector<OverflowReport> overflows;
  std::copy_if(e.overflows.begin(), e.overflows.end(), std::back_inserter(overflows),
               [&](const OverflowReport& o) { return o.step > after; });
  const std::string origins = overflow_origins(overflows);
  if (!origins.empty()) evidence += "; inf/NaN gradients started in " + origins;
  const bool routine = share <= kRoutineSkipShare;
  add(out, "skipped_steps", routine ? Severity::Note : Severity::Warning,
      routine ? "A few steps were skipped: the loss scaler finding its level"
              : "Many steps were skipped: the optimizer did not update on them",
      evidence,
      routine ? "nothing to do: dynamic loss scaling skips a step whenever it tries a scale too high"
              : "the named layer's gradients overflow FP16: lower the learning rate, warm it up, or use amp-bf16 "
                "(FP32's range)");
}

void scale_collapse(const RunEvidence& e, const std::vector<SkippedRun>& skips, const SkippedRun* search,
                    std::vector<Finding>& out) {
  const SkippedRun* longest = nullptr;
  for (const SkippedRun& r : skips)
    if (&r != search && (!longest || r.length > longest->length)) longest = &r;
  if (!longest || longest->length < kScaleCollapseRun) return;  // the live alarm's threshold too
  std::vector<OverflowReport> during;
  for (const OverflowReport& o : e.overflows)
    if (o.step >= longest->first_step && o.step <= longest->last_step) during.push_back(o);
  std::string evidence =
      format("%lld consecutive steps skipped (%lld to %lld): the loss scale fell from %g to %g",
             static_cast<long long>(longest->length), static_cast<long long>(longest->first_step),
             static_cast<long long>(longest->last_step), longest->first_scale, longest->reached_scale());
  const std::string origins = overflow_origins(during);
  if (!origins.empty()) evidence += "; inf/NaN gradients started in " + origins;
  add(out, "scale_collapse", Severity::Problem, "The loss scale collapsed: gradients overflow whatever the scale",
      evidence, kScaleCollapseAdvice);
}

void gradient_underflow(const RunEvidence& e, std::vector<Finding>& out) {
  if (!fp16_storage(e) || e.run.config.precision.scales_loss()) return;
  const GradientHistogram* worst = nullptr;
  for (const GradientHistogram& h : e.histograms)
    if (h.kind == "activation" && (!worst || h.epoch >= worst->epoch)) worst = &h;
  if (!worst) return;
  const double below = below_fp16_normal_share(*worst), zeros = static_cast<double>(worst->zeros) / worst->total;
  if (below < kUnderflowShare) return;
  add(out, "gradient_underflow", Severity::Problem, "Gradients underflow FP16 and no loss scaling lifts them",
      format("epoch %d: %s of activation gradients are below 2^-14 (FP16 subnormals, losing bits down to 2^-24 "
             "where they flush to zero); %s are exactly zero",
             worst->epoch, percent(below).c_str(), percent(zeros).c_str()),
      "turn on dynamic loss scaling (a loss scale of dynamic), as amp-fp16 does: it multiplies the loss so these "
      "gradients land in FP16's range");
}

void activation_overflow_risk(const RunEvidence& e, std::vector<Finding>& out) {
  // The worst layer: one with inf/NaN activations, else the largest activation.
  auto severity = [](const LayerNumerics& n) {
    return std::pair(n.activation.nonfinite_fraction > 0, n.activation.max_abs);
  };
  const auto found = std::max_element(e.layers.begin(), e.layers.end(),
                                      [&](const auto& a, const auto& b) { return severity(a) < severity(b); });
  if (found == e.layers.end()) return;
  const LayerNumerics* worst = &*found;
  const double max = worst->activation.max_abs;
  const double headroom = max > 0 ? std::log2(kHalfMax / max) : 99;
  if (headroom >= kHeadroomPowersOfTwo && worst->activation.nonfinite_fraction == 0) return;
  const bool fp16 = fp16_storage(e);
  add(out, "activation_overflow_risk", fp16 ? Severity::Warning : Severity::Note,
      fp16 ? "Activations come close to FP16's largest value" : "Activations would overflow FP16",
      format("%s: max |activation| %.6g at step %lld, %.1f powers of two below FP16's 65504%s", worst->layer.c_str(),
             max, static_cast<long long>(worst->step), headroom,
             worst->activation.nonfinite_fraction > 0 ? "; some are already inf/NaN" : ""),
      fp16 ? "lower the learning rate or its warm-up, or use amp-bf16 (FP32's range); the named layer is where an "
             "inf would start"
           : "this run is safe in its own precision; if you move it to amp-fp16, use amp-bf16 instead, or keep the "
             "named layer in FP32");
}

// The FP8 tensors of the last probed step whose share (saturated or underflowed) passes `threshold`, worst first:
// "layer1.0.conv1's input (E4M3)".
struct Fp8Tensor {
  const LayerNumerics* layer;
  const char* role;
  const Fp8TensorNumerics* cast;
};
std::vector<Fp8Tensor> fp8_tensors_past(const std::vector<const LayerNumerics*>& step, double Fp8TensorNumerics::*share,
                                        double threshold) {
  std::vector<Fp8Tensor> out;
  for (const LayerNumerics* n : step)
    for (const auto& [role, cast] : {std::pair{"input", &n->fp8_input}, std::pair{"weight", &n->fp8_weight},
                                     std::pair{"output gradient", &n->fp8_output_grad}})
      if (cast->count > 0 && cast->*share > threshold) out.push_back({n, role, cast});
  std::stable_sort(out.begin(), out.end(),
                   [&](const Fp8Tensor& a, const Fp8Tensor& b) { return a.cast->*share > b.cast->*share; });
  return out;
}

// "layer1.0.conv1's input (E4M3): 2.3% clipped, amax 1234 at scale 0.5; ..." for the first three.
std::string fp8_evidence(const std::vector<Fp8Tensor>& tensors, double Fp8TensorNumerics::*share, const char* what) {
  std::string text;
  for (size_t i = 0; i < tensors.size() && i < 3; ++i) {
    const Fp8Tensor& t = tensors[i];
    text += format("%s%s's %s (%s): %s %s, amax %.4g at scale %.4g (amax x scale %.4g against %.0f)", i ? "; " : "",
                   t.layer->layer.c_str(), t.role, t.cast->format_max > 448 ? "E5M2" : "E4M3",
                   percent(t.cast->*share).c_str(), what, t.cast->amax, t.cast->scale, t.cast->amax * t.cast->scale,
                   t.cast->format_max);
  }
  if (tensors.size() > 3) text += format("; %zu more", tensors.size() - 3);
  return text;
}

// ", or precision.fp8.first_and_last off, which keeps conv1 and fc in BF16" where the run put them in FP8 and they
// are among the named tensors: the one setting that takes layers out of FP8.
std::string first_and_last_advice(const RunEvidence& e, const std::vector<Fp8Tensor>& tensors) {
  const bool named = std::any_of(tensors.begin(), tensors.end(), [](const Fp8Tensor& t) {
    return t.layer->layer == "conv1" || t.layer->layer == "fc";
  });
  return e.run.config.precision.fp8.first_and_last && named
             ? "; or precision.fp8.first_and_last off, which keeps conv1 and fc in BF16"
             : "";
}

void fp8_saturation(const RunEvidence& e, std::vector<Finding>& out) {
  const auto tensors =
      fp8_tensors_past(last_probed_layers(e.layers), &Fp8TensorNumerics::saturated_fraction, kFp8ClippedShareOfNote);
  if (!tensors.empty()) {
    // A short history or the most recent amax lets the scale follow each step's amax, and lag every rise.
    const DelayedScalingSettings& scaling = e.run.config.precision.fp8.scaling;
    std::string lagging;
    if (scaling.rule == AmaxRule::MostRecent) lagging = "the amax rule max (precision.fp8.amax_rule, here most-recent)";
    if (scaling.history_length < 16)
      lagging += (lagging.empty() ? "" : " and ") + std::string("a longer amax history ") +
                 "(precision.fp8.amax_history_length, here " + std::to_string(scaling.history_length) + ")";
    add(out, "fp8_saturation", Severity::Warning,
        format("FP8 clips the largest values of %zu tensor%s", tensors.size(), tensors.size() == 1 ? "" : "s"),
        format("step %lld: ", static_cast<long long>(tensors.front().layer->step)) +
            fp8_evidence(tensors, &Fp8TensorNumerics::saturated_fraction, "clipped"),
        (lagging.empty() ? std::string() : lagging + " keeps the scale from lagging each rise of the amax; or ") +
            "raise the margin (precision.fp8.margin, here " + std::to_string(scaling.margin) +
            ") to leave headroom above the amax history" + first_and_last_advice(e, tensors));
    return;
  }
  // Clipping at an earlier probe (--numerics-every) that the last one no longer shows: a scale from the amax history
  // lagged a rise of its amax, then caught up. Said as a note, at the probe that clipped the most.
  std::map<int64_t, std::vector<const LayerNumerics*>> probes;
  for (const LayerNumerics& n : e.layers) probes[n.step].push_back(&n);
  std::vector<Fp8Tensor> worst;
  size_t clipping_probes = 0;
  for (const auto& [step, layers] : probes) {
    auto past = fp8_tensors_past(layers, &Fp8TensorNumerics::saturated_fraction, kFp8ClippedShareOfNote);
    if (past.empty()) continue;
    ++clipping_probes;
    if (worst.empty() || past.front().cast->saturated_fraction > worst.front().cast->saturated_fraction)
      worst = std::move(past);
  }
  if (worst.empty()) return;
  add(out, "fp8_saturation", Severity::Note, "FP8 clipped the largest values earlier in the run, not at its end",
      format("%zu of %zu probed steps clipped; the most at step %lld: ", clipping_probes, probes.size(),
             static_cast<long long>(worst.front().layer->step)) +
          fp8_evidence(worst, &Fp8TensorNumerics::saturated_fraction, "clipped"),
      "a step whose amax rises suddenly is cast with the scale of the steps before it (the history holds the "
      "rise from the next step on, however long it is): a margin (precision.fp8.margin) leaves headroom for such "
      "a rise");
}

void fp8_underflow(const RunEvidence& e, std::vector<Finding>& out) {
  const auto tensors =
      fp8_tensors_past(last_probed_layers(e.layers), &Fp8TensorNumerics::underflow_fraction, kFp8UnderflowShare);
  if (tensors.empty()) return;
  const bool e4m3_gradient = std::any_of(tensors.begin(), tensors.end(), [](const Fp8Tensor& t) {
    return t.cast == &t.layer->fp8_output_grad && t.cast->format_max <= 448;
  });
  const int margin = e.run.config.precision.fp8.scaling.margin;
  add(out, "fp8_underflow", Severity::Warning,
      format("FP8 makes small values zero in %zu tensor%s", tensors.size(), tensors.size() == 1 ? "" : "s"),
      format("step %lld: ", static_cast<long long>(tensors.front().layer->step)) +
          fp8_evidence(tensors, &Fp8TensorNumerics::underflow_fraction, "of nonzero values made zero"),
      (margin > 0 ? "each power of two of the margin (precision.fp8.margin, here " + std::to_string(margin) +
                        ") moves the smallest values further below FP8's: lower it; and "
                  : std::string()) +
          (e4m3_gradient ? "gradients span more powers of two than E4M3 holds: set precision.fp8.formats to hybrid "
                           "(E5M2 gradients)"
                         : "these tensors span more powers of two than FP8 holds below their amax") +
          first_and_last_advice(e, tensors));
}

void lr_schedule_skips(const RunEvidence& e, const SkippedRun* search, std::vector<Finding>& out) {
  const int64_t skipped = skipped_count(e);
  if (skipped == 0 || e.run.config.schedule == Schedule::Constant) return;
  const double share = static_cast<double>(skipped) / static_cast<double>(e.steps.size());
  if (share <= kRoutineSkipShare) return;
  // Where the initial scale's search made all but a routine share of the skips after it (as skipped_steps counts
  // them), a lower initial scale is the fix, not an overflow's.
  bool initial_scale_did = false;
  if (search) {
    const auto after = [&](const StepReport& s) { return s.step > search->last_step; };
    const auto later = static_cast<double>(
        std::count_if(e.steps.begin(), e.steps.end(), [&](const StepReport& s) { return s.skipped && after(s); }));
    const auto steps = static_cast<double>(std::count_if(e.steps.begin(), e.steps.end(), after));
    initial_scale_did = steps == 0 || later / steps <= kRoutineSkipShare;
  }
  add(out, "lr_schedule_skips", Severity::Warning, "The learning-rate schedule ran on through skipped steps",
      format("the %s schedule advanced through %lld skipped steps (%s of the run) where the optimizer did not "
             "update: the run made that many fewer updates than its schedule assumes",
             choice_name(e.run.config.schedule), static_cast<long long>(skipped), percent(share).c_str()),
      std::string(initial_scale_did ? "start the loss scale lower (see the initial loss scale)"
                                    : "fix what overflows first (see the skipped steps)") +
          "; PyTorch warns of the same when scheduler.step() follows a skipped scaler.step()");
}

void clipping_order(const RunEvidence& e, std::vector<Finding>& out) {
  const double clip = e.run.config.grad_clip_norm;
  if (clip <= 0) return;
  std::vector<double> norms;
  int64_t clipped = 0, clipped_if_scaled = 0, scaled_steps = 0;
  for (const StepReport& s : e.steps) {
    if (s.skipped || !std::isfinite(s.grad_norm)) continue;
    norms.push_back(s.grad_norm);
    clipped += s.grad_norm > clip;
    clipped_if_scaled += static_cast<double>(s.grad_norm) * s.loss_scale > clip;
    scaled_steps += s.loss_scale != 1;
  }
  if (scaled_steps == 0 || norms.empty()) return;
  std::nth_element(norms.begin(), norms.begin() + norms.size() / 2, norms.end());
  const double n = static_cast<double>(norms.size());
  add(out, "clipping_order", Severity::Note, "Clipping acts on unscaled gradients here; scaled, it would clip far more",
      format("clip norm %g: %s of steps clipped (median gradient norm %.3g); measured on the still-scaled gradients "
             "it would have clipped %s",
             clip, percent(clipped / n).c_str(), norms[norms.size() / 2], percent(clipped_if_scaled / n).c_str()),
      "the workbench clips between unscaling and the optimizer step; in PyTorch call scaler.unscale_(optimizer) "
      "before clip_grad_norm_, or the threshold meets gradients multiplied by the loss scale");
}

void tensor_core_ineligible(const RunEvidence& e, std::vector<Finding>& out) {
  if (on_cpu(e) || !low_precision(e)) return;
  std::string layers;
  int count = 0;
  for (const LayerNumerics* n : last_probed_layers(e.layers)) {
    if (n->kind == "batch_norm" || (n->in_channels % 8 == 0 && n->out_channels % 8 == 0)) continue;
    if (count++ < 4)
      layers +=
          (layers.empty() ? "" : ", ") + n->layer +
          format(" (%lld -> %lld)", static_cast<long long>(n->in_channels), static_cast<long long>(n->out_channels));
  }
  if (count == 0) return;
  add(out, "tensor_core_ineligible", Severity::Note,
      format("%d layer%s cannot use tensor cores fully: channels not a multiple of 8", count, count == 1 ? "" : "s"),
      layers + (count > 4 ? format(" and %d more", count - 4) : ""),
      "pad the channel counts to multiples of 8 (a classifier with 8 outputs costs nothing over 5); the stem's 3 "
      "input channels are usual and cost little");
}

void batch_too_small(const RunEvidence& e, std::vector<Finding>& out) {
  const EpochTimes t = split_median_step(timing_of(e));  // in the ms `show` and the report give
  if (t.steps == 0 || t.step_seconds <= 0) return;
  const auto at = [&](TimeClass c) { return t.op_seconds[static_cast<size_t>(c)]; };
  const double fixed =
      at(TimeClass::Optimizer) + at(TimeClass::ScaleCheck) + at(TimeClass::HostWait) + std::max(0.0, t.other_seconds());
  const double compute = t.step_seconds - t.data_wait_seconds;
  if (compute <= 0 || fixed / compute < kFixedCostShare) return;
  add(out, "batch_too_small", Severity::Warning, "The batch is too small to fill the device",
      format("batch %d: the optimizer, the scale check and host work between ops take %s of %s of compute per step, "
             "whatever the batch",
             e.run.batch_size, ms(fixed).c_str(), ms(compute).c_str()) +
          " (" + percent(fixed / compute) + ")",
      "raise the batch size (and the learning rate with it) until these costs are small beside the layers' work");
}

// What to do about a run timed beside other work: its sweep's timing in alternation is the figure to go by, unless
// that too was taken beside other work.
std::string timing_advice(const RunEvidence& e) {
  if (!e.alternating)
    return "its times and speed say as much about the other work as about this configuration: train it again on a "
           "quiet machine, or compare the configurations with a sweep run here (not on Slurm), which times them in "
           "alternation";
  if (const std::string loaded = alternation_warning(*e.alternating); !loaded.empty())
    return "its training's times say as much about the other work as about this configuration, and so do its "
           "sweep's, " +
           loaded +
           ": time the configurations again on a quiet machine (ampwb sweep run N times a stored sweep's runs anew; "
           "in the workbench, sweep them again)";
  return "its training's times say as much about the other work as about this configuration; its sweep also timed it "
         "in alternation" +
         std::string(e.alternating->load.known() ? ", on a quiet machine," : "") +
         " where the machine's drift falls on every configuration alike: that speed-up (the comparison's row \"timed "
         "in alternation (sweep)\", against a run of the sweep) is the one to go by";
}

void timing_unreliable(const RunEvidence& e, std::vector<Finding>& out) {
  const MachineLoad load = mean_epoch_times(e.times).load;
  const std::string why = timing_warning({{e.run.id, load}});
  if (why.empty()) return;
  add(out, "timing_unreliable", Severity::Warning, "Timings unreliable: other work shared the machine",
      why + " (" + machine_load_text(load) + ", the mean over its epochs' training)", timing_advice(e));
}

// 0 for FP32, 1 for TF32 (FP32's range, a narrower mantissa in matrix products), 2 for the 16-bit modes, 3 for FP8.
int full_precision_rank(const RunEvidence& e) {
  switch (e.run.config.precision.mode) {
    case PrecisionMode::Fp32:
      return 0;
    case PrecisionMode::Tf32:
      return 1;
    case PrecisionMode::AmpFp8:
      return 3;
    default:
      return 2;
  }
}

// "1.60×", or for a slowdown "0.63× (1.60× slower)": the ratio first, as the evidence gives it.
std::string ratio_headline(const SpeedUp& s) {
  return s.ratio >= 1 ? speed_up_ratio_text(s) : format("%.2f\u00d7 (", s.ratio) + speed_up_ratio_text(s) + ")";
}

// The last epoch a run validated, or none.
const EpochReport* last_validated(const RunEvidence& e) {
  if (e.run.info.validation_images <= 0) return nullptr;
  for (auto it = e.epochs.rbegin(); it != e.epochs.rend(); ++it)
    if (std::isfinite(it->validation_accuracy)) return &*it;
  return nullptr;
}

// Accuracy against the baseline's: a difference within what chance in a validation set of this size moves is no
// difference, and one beyond it is still one seed's against one seed's.
void accuracy_vs_baseline(const RunEvidence& e, const RunEvidence& base, std::vector<Finding>& out) {
  const EpochReport *a = last_validated(e), *b = last_validated(base);
  // Accuracies on other images (another dataset, split or number of them) are not one measurement's two results.
  if (!a || !b || e.run.dataset_fingerprint != base.run.dataset_fingerprint ||
      e.run.info.validation_images != base.run.info.validation_images)
    return;
  const double n = static_cast<double>(e.run.info.validation_images);
  const double pa = a->validation_accuracy, pb = b->validation_accuracy, points = 100 * (pa - pb);
  // Each image's answer right or wrong by chance, as if the runs had answered apart (on the same images they did
  // not, and the interval is then wider than it need be): Agresti and Caffo's interval, one right and one wrong
  // answer added to each run's, which holds at 0% and 100% too.
  const double ta = (pa * n + 1) / (n + 2), tb = (pb * n + 1) / (n + 2);
  const double half = 100 * 1.96 * std::sqrt((ta * (1 - ta) + tb * (1 - tb)) / (n + 2));
  const double low = 100 * (ta - tb) - half, high = 100 * (ta - tb) + half;
  std::string evidence = format(
      "final validation accuracy %.2f%% (run %lld, epoch %d) against %.2f%% (run %lld, epoch %d): %+.2f points, 95%% "
      "interval %+.2f to %+.2f over %lld validation images",
      100 * pa, static_cast<long long>(e.run.id), a->epoch, 100 * pb, static_cast<long long>(base.run.id), b->epoch,
      points, low, high, static_cast<long long>(n));
  if (a->epoch != b->epoch) evidence += " (after different numbers of epochs)";
  const std::string seeds =
      "train several seeds of both (a sweep over the seed) and compare their groups' mean and spread";
  const std::string pair = format("%.2f%% against %.2f%%", 100 * pa, 100 * pb);
  if (low <= 0 && high >= 0) {
    add(out, "accuracy_vs_baseline", Severity::Note, "Accuracy not distinguishable from the baseline's: " + pair,
        evidence,
        "this many validation images cannot tell these accuracies apart: validate on more images, or " + seeds);
    return;
  }
  add(out, "accuracy_vs_baseline", high < 0 ? Severity::Warning : Severity::Note,
      (high < 0 ? "Less accurate than the baseline: " : "More accurate than the baseline: ") + pair, evidence,
      "beyond what chance in the validation images explains, but from one seed of each, and seeds alone move "
      "accuracy too: " +
          seeds + " before reading it as the precision's");
}

// Why the run is or is not faster than the baseline, class by class. Never contradicts the expectation rules: a
// speed-up with an emulated format is put down to memory traffic, not arithmetic. Where the runs' sweep timed them in
// alternation, where the machine's drift falls on both alike, that figure is the verdict's, as `compare` shows it,
// unless other work shared its turns and not the trainings'; the other figure stands beside it as evidence.
void speed_vs_baseline(const RunEvidence& e, const RunEvidence& base, std::vector<Finding>& out) {
  const RunTiming run_timing = timing_of(e), base_timing = timing_of(base);
  SpeedUp speedup = speed_up(run_timing.speed, base_timing.speed);
  const std::string unreliable =
      timing_warning({{base.run.id, mean_epoch_times(base.times).load}, {e.run.id, mean_epoch_times(e.times).load}});
  std::string alternation, loaded_alternation;  // the alternation's figure as evidence, and its load where busy
  bool by_alternation = false;                  // its figure is the verdict's
  if (e.alternating)
    if (const SpeedUp timed = alternating_speed_up(*e.alternating, e.run.id, base.run.id); timed.known()) {
      loaded_alternation = alternation_warning(*e.alternating);
      const std::string how =
          format("timed in alternation after the sweep's trainings, %zu rounds of %lld steps on %s: ",
                 e.alternating->images_per_second.front().size(),
                 static_cast<long long>(e.alternating->steps_per_round), e.alternating->data.c_str()) +
          speed_up_text(timed);
      // Else the quiet trainings' figure stands, where they have one.
      by_alternation = loaded_alternation.empty() || !unreliable.empty() || !speedup.known();
      if (by_alternation) speedup = timed;
      alternation = how + (by_alternation ? "; during the trainings, "
                                          : "; " + loaded_alternation + ": the trainings' figure stands; ");
    }
  const std::string runs = format("run %lld, %s, against run %lld, %s", static_cast<long long>(e.run.id),
                                  mode_of(e).c_str(), static_cast<long long>(base.run.id), mode_of(base).c_str());
  // Runs too short to leave a steady-state step (warm-up, each epoch's first and last steps) have no speed to show:
  // said, rather than a baseline asked for and never mentioned again.
  if (!speedup.known()) {
    std::string which;
    for (const auto& [r, timing] : {std::pair{&e, &run_timing}, std::pair{&base, &base_timing}})
      if (!timing->speed.known())
        which += format("%srun %lld: %zu steps", which.empty() ? "" : "; ", static_cast<long long>(r->run.id),
                        r->steps.size());
    add(out, "speed_vs_baseline", Severity::Note, "No speed to compare with the baseline",
        "no steady-state training speed (" + runs + "; " + which + "): too few steps past the first " +
            std::to_string(kWarmupSteps) + " and each epoch's first and last",
        "train for more steps (more images, or more epochs) to measure the speed-up");
    return;
  }
  std::string evidence = alternation + (run_timing.speed.known() && base_timing.speed.known()
                                            ? "steady-state training speed " + speed_text(run_timing.speed) +
                                                  " against " + speed_text(base_timing.speed) + " (" + runs + ")"
                                            : "no steady-state training speed (" + runs +
                                                  "): too few steps past the warm-up and each epoch's first and last");
  const TimeComparison by_class = compare_times(base_timing, run_timing);
  if (by_class.available) evidence += "; by class of op: " + by_class.sentence;
  // The verdict's own figure taken beside other work: the trainings', or the alternation's where that is the figure.
  const std::string verdict_unreliable = !by_alternation              ? unreliable
                                         : loaded_alternation.empty() ? ""
                                                                      : "timings unreliable: " + loaded_alternation;
  const std::string figure = speed_up_text(speedup);
  const std::string other = work_difference(e.run, base.run);
  if (e.run.config.precision.mode == base.run.config.precision.mode) {  // no precision mode's speed-up to look for
    const std::string settings = precision_settings_difference(e, base);
    std::string action;
    if (!settings.empty())
      action = "the runs differ in " + settings + (other.empty() ? "" : " and in " + other) +
               ": a difference in speed beyond the noise is theirs, within it the machine's";
    else if (other.empty())
      action =
          "the runs differ in neither precision nor work, so their speeds should agree: a difference is the "
          "machine's (other work, clocks); train them again on a quiet machine";
    else
      action = "the runs differ in " + other +
               ", not in precision: to see what a precision mode gains, compare against a run that differs in "
               "precision alone";
    add(out, "speed_vs_baseline", Severity::Note,
        "Same precision " + std::string(settings.empty() ? "" : "mode ") + "as the baseline (" + mode_of(e) + ")" +
            (settings.empty() ? "" : ", set otherwise") + ": " + figure,
        evidence + (verdict_unreliable.empty() ? "" : "; " + verdict_unreliable), action);
    return;
  }
  if (!other.empty()) {
    add(out, "speed_vs_baseline", Severity::Warning,
        "Speed-up " + ratio_headline(speedup) + ", not the precision's alone: " + other,
        (by_class.available || by_alternation ? evidence : evidence + "; speed-up " + figure) +
            (verdict_unreliable.empty() ? "" : "; " + verdict_unreliable),
        "the speed-up mixes the precision's effect with these differences: compare runs that differ in precision "
        "alone on one machine, as a precision sweep run here, which also times them in alternation");
    return;
  }
  const bool expected_none = std::any_of(out.begin(), out.end(), [](const Finding& f) {
    return f.rule == "fp16_emulated" || f.rule == "fp8_emulated" || f.rule == "bf16_not_native";
  });
  if (expected_none && speedup.distinguishable() && speedup.ratio < 1 &&
      full_precision_rank(e) > full_precision_rank(base)) {
    // However busy the machine was, emulation computes in FP32 and converts besides: a slowdown is its own. How much
    // of it is the format's, only a quiet machine tells.
    add(out, "speed_vs_baseline", Severity::Note,
        "Slower than the baseline, as an emulated format can be: " + ratio_headline(speedup),
        evidence + (verdict_unreliable.empty() ? "" : "; " + verdict_unreliable),
        std::string("the emulated format computes in FP32 and adds its conversions, which here cost more than its "
                    "narrower storage saves") +
            (verdict_unreliable.empty()
                 ? ""
                 : ": slower it is whatever else the machine did, but by how much, these timings cannot say") +
            "; the run's worth here is its numerics, and its speed is measured where the format has arithmetic "
            "units of its own");
    return;
  }
  // Read the other way round, a faster baseline of a narrower format is the run's slowdown: said in every verdict.
  const std::string baseline_narrower =
      full_precision_rank(e) < full_precision_rank(base)
          ? "the baseline computes in a narrower format (" + mode_of(base) + ") than this run (" + mode_of(e) +
                "): this is its speed-up read the other way round; choose the " + mode_of(e) +
                " run as the baseline to read what " + mode_of(base) + " gains"
          : "";
  if (!verdict_unreliable.empty()) {
    std::string said = evidence, action;
    if (!by_alternation) {
      if (!by_class.available) said += "; speed-up " + figure;  // the sentence ends with it
      action =
          "train both again on a quiet machine, or compare them with a sweep run here (not on Slurm), which times "
          "configurations in alternation so that the machine's drift falls on both alike";
    } else {
      said += "; while timed in alternation, " + machine_load_text(e.alternating->load);
      action =
          "the other work took its share of every turn, as of the trainings', so no figure here is the precision's: "
          "time the configurations again on a quiet machine (ampwb sweep run N times a stored sweep's runs anew; in "
          "the workbench, sweep them again)";
    }
    if (!baseline_narrower.empty()) action += "; and " + baseline_narrower;
    // A figure whose interval holds 1.0× is no speed-up, and its heading gives the interval that makes it so.
    add(out, "speed_vs_baseline", Severity::Warning,
        (speedup.distinguishable() ? "Speed-up " + ratio_headline(speedup) : speed_up_within_noise_headline(speedup)) +
            ", " + verdict_unreliable,
        said, action);
    return;
  }
  const std::string why_not_faster =
      !baseline_narrower.empty()
          ? baseline_narrower
          : "see the other findings for why (emulated formats, data wait, small batches); AMP's gains come from "
            "16-bit arithmetic units and memory traffic, which this step did not use enough";
  if (!speedup.distinguishable()) {
    add(out, "speed_vs_baseline", Severity::Warning, speed_up_within_noise_headline(speedup), evidence, why_not_faster);
  } else if (speedup.ratio < 1) {
    add(out, "speed_vs_baseline", Severity::Warning, "Slower than the baseline: " + figure, evidence, why_not_faster);
  } else if (expected_none) {
    add(out, "speed_vs_baseline", Severity::Note, "Faster than the baseline with an emulated format: " + figure,
        evidence,
        "the emulated format computes in FP32: what it saves is memory traffic (16-bit storage, smaller "
        "activations), not arithmetic; hardware with 16-bit units (AVX512-BF16, AMX, a GPU) gains far more");
  } else if (speedup.ratio < kWorthwhileSpeedup) {
    add(out, "speed_vs_baseline", Severity::Note, "A small speed-up: " + figure, evidence,
        "real but small: weigh it against AMP's numerical risk (the accuracy rows of the runs' comparison)");
  } else {
    add(out, "speed_vs_baseline", Severity::Note, "Faster than the baseline: " + figure, evidence,
        "the speed-up is real on this machine; check the accuracy rows of the runs' comparison before adopting it");
  }
}

}  // namespace

double below_fp16_normal_share(const GradientHistogram& h) {
  if (h.total == 0) return 0;
  int64_t below = 0;
  for (size_t i = 0; i < h.counts.size(); ++i)
    if (h.min_log2 + static_cast<int>(i) < -14) below += h.counts[i];
  return static_cast<double>(below) / static_cast<double>(h.total);
}

const char* severity_name(Severity s) {
  switch (s) {
    case Severity::Problem:
      return "problem";
    case Severity::Warning:
      return "warning";
    case Severity::Note:
      return "note";
  }
  return "?";
}

void to_json(nlohmann::json& j, const Severity& s) { j = severity_name(s); }
void from_json(const nlohmann::json& j, Severity& s) {
  for (Severity candidate : {Severity::Problem, Severity::Warning, Severity::Note})
    if (j.get<std::string>() == severity_name(candidate)) {
      s = candidate;
      return;
    }
  throw Error("unknown severity " + j.dump());
}
void to_json(nlohmann::json& j, const Finding& f) { write_fields(j, f); }

const std::vector<std::string>& diagnosis_rules() {
  static const std::vector<std::string> rules = {"unfinished",
                                                 "one_class",
                                                 "data_bound",
                                                 "fp16_emulated",
                                                 "fp8_emulated",
                                                 "bf16_not_native",
                                                 "initial_scale_too_high",
                                                 "skipped_steps",
                                                 "scale_collapse",
                                                 "gradient_underflow",
                                                 "activation_overflow_risk",
                                                 "fp8_saturation",
                                                 "fp8_underflow",
                                                 "lr_schedule_skips",
                                                 "clipping_order",
                                                 "tensor_core_ineligible",
                                                 "batch_too_small",
                                                 "timing_unreliable",
                                                 "speed_vs_baseline",
                                                 "accuracy_vs_baseline"};
  return rules;
}

RunEvidence load_charted_evidence(const RunStore& store, int64_t run) {
  RunEvidence e;
  e.run = store.run(run);
  e.epochs = store.epochs(run);
  e.steps = store.steps(run);
  e.histograms = store.histograms(run);
  e.layers = store.layer_numerics(run);
  e.divergence = store.divergence(run);
  return e;
}

RunEvidence load_evidence(const RunStore& store, int64_t run) {
  RunEvidence e = load_charted_evidence(store, run);
  e.overflows = store.overflows(run);
  e.times = store.epoch_times(run);
  e.confusion = store.confusion_matrices(run);
  e.alternating = store.alternating_speed(run);
  return e;
}

std::vector<Finding> diagnose(const RunEvidence& run, const RunEvidence* baseline) {
  std::vector<Finding> out;
  unfinished(run, out);
  one_class(run, baseline, out);
  data_bound(run, out);
  fp16_emulated(run, out);
  fp8_emulated(run, out);
  bf16_not_native(run, out);
  // The runs of skipped steps, read once; the initial scale's are said apart from the others.
  const std::vector<SkippedRun> skips = skipped_runs(run.steps);
  const SkippedRun* search = initial_level_search(skips);
  initial_scale(search, out);
  skipped_steps(run, search, out);
  scale_collapse(run, skips, search, out);
  gradient_underflow(run, out);
  activation_overflow_risk(run, out);
  fp8_saturation(run, out);
  fp8_underflow(run, out);
  lr_schedule_skips(run, search, out);
  clipping_order(run, out);
  tensor_core_ineligible(run, out);
  batch_too_small(run, out);
  timing_unreliable(run, out);
  if (baseline) speed_vs_baseline(run, *baseline, out);
  if (baseline) accuracy_vs_baseline(run, *baseline, out);
  std::stable_sort(out.begin(), out.end(), [](const Finding& a, const Finding& b) { return a.severity < b.severity; });
  return out;
}

}  // namespace ampwb
