// The run store's reading commands: runs, show, compare. Human tables by default, --json for scripts; every command
// takes --db. (Exports, edits and the store's own care are in store_commands.cpp.)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "analysis/divergence_text.h"
#include "analysis/numerics_grid.h"
#include "analysis/report_text.h"
#include "analysis/run_compare.h"
#include "analysis/run_groups.h"
#include "analysis/time_comparison.h"
#include "commands.h"
#include "store/final_weights.h"
#include "store/run_store.h"
#include "store/store_location.h"
#include "text_table.h"
#include "train/record_json.h"

namespace ampwb::cli {
namespace {
using nlohmann::json;

// --- the commands ---

// Stores are opened Existing: a missing file is an error, a write-protected one is read, not changed.
std::string run_label(const RunRecord& r) { return std::to_string(r.id) + " (" + printable(r.name) + ")"; }

struct RunsOptions {
  std::string status, tag, db;
  bool json = false;
};

// "baseline, bf16": a run's tags as the workbench's Tags column shows them.
std::string join_tags(const std::vector<std::string>& tags) {
  std::string out;
  for (const std::string& t : tags) out += (out.empty() ? "" : ", ") + t;
  return out;
}

int runs_command(const RunsOptions& options) {
  const bool as_json = options.json;
  const std::string& status = options.status;
  const std::string& tag = options.tag;
  const std::string path = store_path(options.db);
  std::error_code ec;
  // No store yet (no file, or an empty one): an empty list, no error, and no store made.
  const bool none = !is_database_server(path) && !std::filesystem::exists(path, ec);
  if (none || (!is_database_server(path) && std::filesystem::file_size(path, ec) == 0 && !ec)) {
    if (as_json)
      std::printf("[]\n");
    else
      std::printf("no runs recorded yet (%s %s)\n",
                  none ? "no run store at" : "an empty file, not yet a run store:", path.c_str());
    return 0;
  }
  RunStore store = open_for_reading(path, "runs");
  json list = json::array();
  Table table({"ID", "NAME", "CREATED (UTC)", "STATUS", "DEPTH", "PRECISION", "DEVICE", "BEST VAL", "EPOCHS", "TIME",
               "RESUME", "WEIGHTS", "TAGS"},
              {true, false, false, false, true, false, false, true, true, true, false, false, false});
  size_t shown = 0;
  for (const RunRecord& r : store.runs()) {
    if (!status.empty() && status != run_status_words(r.status) && status != run_state_words(r)) continue;
    if (!tag.empty() &&
        std::none_of(r.tags.begin(), r.tags.end(), [&](const std::string& t) { return same_tag(t, tag); }))
      continue;
    const RunSummary s = summarize(r, store.epochs(r.id));
    const bool resumable = store.resumable(r.id);
    ++shown;
    if (as_json) {
      json j = r;
      j["summary"] = s;
      j["resumable"] = resumable;
      j["final_weights"] = has_final_weights(r);
      j["final_weights_missing"] = final_weights_state(r) == "missing";  // recorded, the file gone
      j["paused_since"] = is_paused(r) ? json(r.info.paused_since) : json(nullptr);  // "running", yet paused
      j["world_size"] = r.info.world_size;                                           // as show --json says it
      j["global_batch_size"] = r.global_batch_size();
      list.push_back(j);
    } else {
      table.add({std::to_string(r.id), r.name, timestamp_text(r.created), run_state_words(r), std::to_string(r.depth),
                 r.precision_name(),
                 // as the workbench lists it: "cpu × 2" for a run on two processes
                 r.device.name() + (r.info.world_size > 1 ? " × " + std::to_string(r.info.world_size) : ""),
                 s.epochs_completed && r.info.validation_images > 0 ? percent_text(s.best_validation_accuracy) : "-",
                 std::to_string(s.epochs_completed) + "/" + std::to_string(r.epochs), duration_text(s.total_seconds),
                 resumable ? "yes" : "", final_weights_state(r), join_tags(r.tags)});
    }
  }
  if (as_json) {
    print_json(list);
  } else if (shown == 0) {
    std::printf("no runs%s in %s\n", status.empty() && tag.empty() ? "" : " match", store.path().c_str());
  } else {
    table.print();
  }
  return 0;
}

std::string ms_text(double ms) { return fixed_text(ms, ms < 10 ? 2 : 1); }
// "1.25×"; "-" without a ratio (no time in one run).
std::string speedup_text(double r) {
  if (!(r > 0)) return "-";
  if (r < 0.01) return "<0.01\u00d7";
  if (r > 100) return ">100\u00d7";
  return fixed_text(r, 2) + "\u00d7";
}

// A run's steady step by class: what `show` prints under "where the time went".
void print_time_breakdown(const RunRecord& r, const RunTiming& timing) {
  const EpochTimes mean = mean_epoch_times(timing.epochs);
  if (mean.steps == 0) return;
  std::printf("\nwhere the time went (ms per step: the median steady step, split by the timed steps' shares)\n");
  std::printf("  device     %s\n",
              r.info.backend_description.empty() ? r.backend.c_str() : r.info.backend_description.c_str());
  if (!r.info.compute.empty()) std::printf("  compute    %s\n", r.info.compute.c_str());
  std::printf("  speed      steady state: %s\n", speed_text(timing.speed).c_str());
  std::printf("  machine    %s\n", machine_load_text(mean.load).c_str());
  if (const std::string warning = timing_warning({{r.id, mean.load}}); !warning.empty())
    std::printf("  %s\n", warning.c_str());
  Table table({"", "MS/STEP", "SHARE"}, {false, true, true});
  for (const TimeRow& row : time_rows(timing)) table.add({row.label, ms_text(row.ms[0]), percent_text(row.share[0])});
  table.print("  ");
}

// A norm as printf's %.4g ("inf", "nan" as they are).
std::string norm_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

void print_overflows(const std::vector<OverflowReport>& list) {
  if (list.empty()) return;
  constexpr size_t kShown = 20, kLayersShown = 3;
  std::printf(
      "\noverflows (%zu skipped step%s; layers nearest the loss first; the gradient norm is inf or NaN, so the\n"
      "  norm of its finite values, before and after unscaling)\n",
      list.size(), list.size() == 1 ? "" : "s");
  Table table({"STEP", "EPOCH", "LOSS SCALE", "INF/NAN", "FINITE NORM SCALED", "UNSCALED", "LAYERS"},
              {true, true, true, true, true, true, false});
  for (size_t i = 0; i < list.size() && i < kShown; ++i) {
    const OverflowReport& o = list[i];
    std::string layers;
    for (size_t l = 0; l < o.layers.size() && l < kLayersShown; ++l) layers += (l ? ", " : "") + o.layers[l];
    if (o.layers.size() > kLayersShown) layers += " (+" + std::to_string(o.layers.size() - kLayersShown) + " more)";
    if (o.layers.empty()) layers = "-";
    table.add({std::to_string(o.step), std::to_string(o.epoch), number_text(o.loss_scale),
               std::to_string(o.nonfinite_values), norm_text(o.finite_grad_norm * o.loss_scale),
               norm_text(o.finite_grad_norm), layers});
  }
  table.print("  ");
  if (list.size() > kShown) std::printf("  ... and %zu more (--json lists them all)\n", list.size() - kShown);
}

// At most this many epochs as columns of the numerics tables, evenly spread with the first and the last.
constexpr size_t kNumericsColumns = 10;

std::vector<size_t> epoch_columns(size_t epochs) {
  std::vector<size_t> columns;
  if (epochs <= kNumericsColumns) {
    for (size_t e = 0; e < epochs; ++e) columns.push_back(e);
    return columns;
  }
  for (size_t i = 0; i < kNumericsColumns; ++i) columns.push_back(i * (epochs - 1) / (kNumericsColumns - 1));
  return columns;
}

void print_numerics_table(const NumericsGrid& g, NumericsMeasure measure) {
  const std::vector<size_t> columns = epoch_columns(g.epochs.size());
  std::vector<std::string> header{"LAYER"};
  for (size_t e : columns) header.push_back("E" + std::to_string(g.epochs[e]));
  Table table(header, [&] {
    std::vector<bool> right(header.size(), true);
    right[0] = false;
    return right;
  }());
  for (size_t l = 0; l < g.layers.size(); ++l) {
    std::vector<std::string> row{g.layers[l]};
    for (size_t e : columns) {
      const std::optional<LayerNumerics>& cell = g.cells[l][e];
      if (!cell) {
        row.push_back("");
        continue;
      }
      const double v = numerics_measure(*cell, measure);
      if (std::isnan(v))  // an FP8 measure of a layer without FP8
        row.push_back("-");
      else if (measure != NumericsMeasure::ActivationHeadroom)
        row.push_back(percent_text(v));
      else if (std::isinf(v))
        row.push_back("all 0");
      else
        row.push_back(fixed_text(v, 1));
    }
    table.add(std::move(row));
  }
  table.print("  ");
}

std::string dtype_counts(const std::map<std::string, int>& counts) {
  std::string text;
  for (const auto& [dtype, layers] : counts) text += (text.empty() ? "" : ", ") + std::to_string(layers) + " " + dtype;
  return text;
}

// `ampwb show`'s per-layer numerics: two layers x epochs heat maps in text and the precision per op.
void print_layer_numerics(const std::vector<LayerNumerics>& records) {
  std::printf("\nper-layer numerics\n");
  if (records.empty()) {
    std::printf("  (none recorded)\n");
    return;
  }
  const NumericsGrid g = numerics_grid(records);
  if (g.epochs.size() > kNumericsColumns)
    std::printf("  %zu of its %zu probed epochs as columns, spread from the first to the last (--json has all)\n",
                kNumericsColumns, g.epochs.size());
  std::printf(
      "  activation headroom on the last probed step of each epoch: log2(65504 / max |activation|), the\n"
      "  powers of two left before FP16 overflows (negative: beyond FP16)\n");
  print_numerics_table(g, NumericsMeasure::ActivationHeadroom);
  if (gradients_stored_in_fp16(records)) {
    std::printf(
        "\n  activation gradients below 2^-14: the fraction of gradient values, as backward received them (times\n"
        "  the loss scale), that are nonzero and below FP16's smallest normal. These gradients are stored in FP16,\n"
        "  so the values below 2^-24 are zeros already; the ones left hold fewer bits, at the edge of underflow\n");
    print_numerics_table(g, NumericsMeasure::ActivationGradBelowNormal);
  } else {
    std::printf(
        "\n  activation-gradient underflow: the fraction of gradient values, as backward received them (times\n"
        "  the loss scale), that are nonzero and below 2^-24, where FP16 would flush them to zero\n");
    print_numerics_table(g, NumericsMeasure::ActivationGradUnderflow);
  }
  if (has_fp8_layers(records)) {
    std::printf(
        "\n  FP8 clipped: the largest share of a layer's FP8 input, weight or output gradient clipped to the\n"
        "  format's largest value (448 E4M3, 57344 E5M2) beyond rounding (- : no FP8)\n");
    print_numerics_table(g, NumericsMeasure::Fp8Saturated);
    std::printf("\n  FP8 made zero: the largest share of those tensors' nonzero values that became zero\n");
    print_numerics_table(g, NumericsMeasure::Fp8Underflow);
  }

  const size_t last = g.epochs.size() - 1;
  std::vector<LayerNumerics> step;
  for (const auto& row : g.cells)
    if (row[last]) step.push_back(*row[last]);
  if (const std::vector<Fp8TensorRow> tensors = fp8_tensor_rows(step); !tensors.empty()) {
    std::printf(
        "\n  FP8 tensors (epoch %d, step %lld): each cast's scale, the amax it was cast with, and the share of the\n"
        "  format's largest value the two fill (FILLED: amax x scale / max; over 1, its largest values are past the\n"
        "  format's, the scale lagging its amax)\n",
        g.epochs[last], static_cast<long long>(g.steps[last]));
    Table table({"LAYER", "TENSOR", "MAX", "SCALE", "AMAX", "FILLED", "CLIPPED", "MADE ZERO"},
                {false, false, true, true, true, true, true, true});
    for (const Fp8TensorRow& t : tensors)
      table.add({t.layer, t.tensor, number_text(t.numbers.format_max), significant_text(t.numbers.scale, 4),
                 significant_text(t.numbers.amax, 4), significant_text(t.filled(), 3),
                 percent_text(t.numbers.saturated_fraction), percent_text(t.numbers.underflow_fraction)});
    table.print("  ");
  }
  std::printf("\n  precision per op (epoch %d, step %lld, loss scale %s)\n", g.epochs[last],
              static_cast<long long>(g.steps[last]), step.empty() ? "-" : number_text(step.front().loss_scale).c_str());
  Table ops({"OP", "LAYERS", "FORWARD", "BACKWARD", "CASTS"}, {false, true, false, false, true});
  int layers = 0;
  int64_t casts = 0;
  for (const auto& [kind, p] : precision_per_op(step)) {
    ops.add(
        {kind, std::to_string(p.layers), dtype_counts(p.forward), dtype_counts(p.backward), std::to_string(p.casts)});
    layers += p.layers;
    casts += p.casts;
  }
  ops.add({"total", std::to_string(layers), "", "", std::to_string(casts)});
  ops.print("  ");
}

// `ampwb show`'s precision divergence: one step in the run's mode against one in FP32, layer by layer.
void print_divergence(const RunRecord& r, const std::optional<PrecisionDivergence>& d) {
  std::printf("\nprecision divergence\n");
  if (!d) {
    std::printf("  %s\n", divergence_absence(r).c_str());
    return;
  }
  std::printf(
      "  one step in %s against one in FP32 from the final weights (after %lld steps, epoch %d) and %lld images\n"
      "  of a training batch: relative L2 errors ||%s - fp32|| / ||fp32||, gradients unscaled (loss scale %s)\n",
      d->mode.c_str(), static_cast<long long>(d->step), d->epoch, static_cast<long long>(d->samples), d->mode.c_str(),
      number_text(d->loss_scale).c_str());
  std::printf("  %s\n", divergence_sentence(*d).c_str());
  std::printf("  departure line (activations): %s\n", divergence_threshold_text(*d).c_str());
  Table table({"LAYER", "KIND", "DTYPE", "ACTIVATION", "ACT GRAD", "WEIGHT GRAD", "NOTE"},
              {false, false, false, true, true, true, false});
  for (const LayerDivergence& l : d->layers)
    table.add({l.layer, l.kind, l.forward_dtype, relative_error_text(l.activation),
               relative_error_text(l.activation_grad), relative_error_text(l.weight_grad),
               divergence_layer_note(*d, l)});
  table.print("  ");
}

struct ShowOptions {
  std::string run, db;
  bool json = false, steps = false;
};

// Whether a recorded checkpoint is still there (or the one before it, which the trainer falls back to): a finished
// run's are removed unless kept.
bool on_disk(const CheckpointInfo& c) {
  std::error_code ec;
  return std::filesystem::exists(c.path, ec) || std::filesystem::exists(c.path + ".prev", ec);
}

int show_command(const ShowOptions& options) {
  const bool as_json = options.json;
  const bool with_steps = options.steps;
  RunStore store = open_for_reading(store_path(options.db), "show");
  const RunRecord r = store.run(store.resolve(options.run));
  const std::vector<EpochReport> epochs = store.epochs(r.id);
  const RunSummary s = summarize(r, epochs);
  const std::vector<CheckpointInfo> checkpoints = store.checkpoints(r.id);
  const std::vector<EpochTimes> times = store.epoch_times(r.id);
  const std::vector<OverflowReport> overflows = store.overflows(r.id);
  if (as_json) {
    json out = {
        {"run", r},         {"config", r.config},           {"info", r.info},       {"summary", s},
        {"epochs", epochs}, {"checkpoints", json::array()}, {"epoch_times", times}, {"overflows", json::array()}};
    for (const CheckpointInfo& c : checkpoints)
      out["checkpoints"].push_back(
          {{"resume_epoch", c.resume_epoch}, {"step", c.step}, {"path", c.path}, {"on_disk", on_disk(c)}});
    for (const OverflowReport& overflow : overflows) {
      json o = overflow;
      o["finite_grad_norm_scaled"] = overflow.finite_grad_norm * overflow.loss_scale;
      out["overflows"].push_back(o);
    }
    out["layer_numerics"] = store.layer_numerics(r.id);
    if (const std::optional<PrecisionDivergence> d = store.divergence(r.id)) {
      out["precision_divergence"] = *d;
      out["precision_divergence"]["sentence"] = divergence_sentence(*d);
    } else {
      out["precision_divergence"] = nullptr;
      out["precision_divergence_absence"] = divergence_absence(r);
    }
    if (with_steps) out["steps"] = store.steps(r.id);
    if (!r.config.precision.scales_loss()) {
      without_loss_scale(out["epochs"]);
      if (with_steps) without_loss_scale(out["steps"]);
    }
    out["world_size"] = r.info.world_size;  // the processes that trained it together, each on `batch_size` images
    out["global_batch_size"] = r.global_batch_size();
    out["launcher"] = choice_name(r.info.launcher);
    // The file `ampwb predict` and the exports load; null when the run kept none.
    out["final_weights"] = has_final_weights(r) ? json(r.info.final_weights) : json(nullptr);
    print_json(out);
    return 0;
  }

  const RunInfo& info = r.info;
  std::printf("run %s\n", run_label(r).c_str());
  if (is_paused(r))
    std::printf("  status     paused since %s (process %lld on %s)\n", r.info.paused_since.c_str(),
                static_cast<long long>(r.pid), r.host.c_str());
  else
    std::printf("  status     %s\n", run_end_words(r.status, r.end_reason).c_str());
  // The time its processes ran from its start, once data and model were set up: its epochs with their validation,
  // and what each epoch's end records (checkpoints, numerics). A pause, or the time between a stop and its
  // resumption, is not in it.
  std::printf("  created    %s   ended %s   ran for %s\n", r.created.c_str(), r.ended.empty() ? "-" : r.ended.c_str(),
              duration_text(r.duration_seconds).c_str());
  std::printf("  dataset    %s (fingerprint %s)\n", r.dataset_path.c_str(),
              r.dataset_fingerprint.empty() ? "-" : r.dataset_fingerprint.c_str());
  if (info.train_images > 0)
    std::printf("             %lld training and %lld validation images, %zu classes, %d px\n",
                static_cast<long long>(info.train_images), static_cast<long long>(info.validation_images),
                info.class_names.size(), r.image_size);
  if (!info.model_summary.empty()) std::printf("  model      %s\n", info.model_summary.c_str());
  std::printf("  device     %s\n", r.backend.c_str());
  if (info.world_size > 1)
    std::printf("  processes  %d, started by %s: %lld images a step in all (%d each)\n", info.world_size,
                choice_name(info.launcher), static_cast<long long>(r.global_batch_size()), r.batch_size);
  if (!info.compute.empty()) std::printf("  compute    %s\n", info.compute.c_str());
  if (has_final_weights(r) || r.status == RunStatus::Finished) {
    const std::string refusal = final_weights_refusal(store, r.id);
    if (refusal.empty())
      std::printf("  weights    %s (ampwb predict %lld IMAGE...)\n", info.final_weights.c_str(),
                  static_cast<long long>(r.id));
    else
      std::printf("  weights    none: %s\n", refusal.c_str());
  }
  std::printf("  recorded   by %s on %s (pid %lld)\n",
              r.versions.empty() ? r.ampwb_version.c_str() : r.versions.c_str(), r.host.empty() ? "?" : r.host.c_str(),
              static_cast<long long>(r.pid));
  if (!r.tags.empty()) std::printf("  tags       %s\n", join_tags(r.tags).c_str());
  if (!r.notes.empty()) {  // a note's later lines under its first, not at the margin
    std::string notes = r.notes;
    for (size_t at = notes.find('\n'); at != std::string::npos; at = notes.find('\n', at + 1))
      notes.insert(at + 1, std::string(13, ' '));
    std::printf("  notes      %s\n", notes.c_str());
  }
  for (const std::string& note : info.notes) std::printf("  note       %s\n", note.c_str());  // what the run noted
  if (!r.unreadable.empty()) std::printf("  damaged    %s (defaults shown instead)\n", r.unreadable.c_str());

  std::printf("\nconfiguration\n");
  Table config({"SETTING", "VALUE"});
  for (const auto& [key, value] : run_settings(r))  // an empty name asked the store to choose one
    config.add({key, key != "name" || value == r.name ? value
                     : value.empty()                  ? "(none given: the run is named " + printable(r.name) + ")"
                                                      : value + " (renamed since: " + printable(r.name) + ")"});
  config.print("  ");

  std::printf("\nepochs\n");
  const bool scaled = r.config.precision.scales_loss();  // else its scale of 1 reads "-"
  if (epochs.empty()) {
    std::printf("  (none completed)\n");
  } else {
    const int topk = topk_reported(r, epochs.front()) ? epochs.front().topk : 0;  // none where k covers every class
    Table table(
        {"EPOCH", "TRAIN LOSS", "TRAIN ACC", "VAL LOSS", "VAL ACC", topk ? "TOP-" + std::to_string(topk) : "TOP-K",
         "EPOCH S", "TRAIN IMG/S", "DATA WAIT S", "SKIPPED", "LOSS SCALE", "PEAK"},
        std::vector<bool>(12, true));
    const bool validated = r.info.validation_images > 0;  // else nothing was measured: "-"
    for (const EpochReport& e : epochs)
      table.add(
          {std::to_string(e.epoch), fixed_text(e.train_loss, 4), percent_text(e.train_accuracy),
           validated ? fixed_text(e.validation_loss, 4) : "-", validated ? percent_text(e.validation_accuracy) : "-",
           validated && topk_reported(r, e) ? percent_text(e.validation_topk) : "-", fixed_text(e.seconds, 2),
           fixed_text(e.images_per_second, 1), fixed_text(e.data_wait_seconds, 2), std::to_string(e.skipped_steps),
           scaled ? number_text(e.loss_scale) : "-", mebibytes_text(e.peak_bytes)});
    table.print("  ");
    std::printf("  (EPOCH S: the whole epoch, its validation included; TRAIN IMG/S: over its training steps alone)\n");
  }

  std::printf("\nsummary\n");
  if (s.epochs_completed) {
    if (r.info.validation_images > 0) {
      std::printf("  best validation accuracy   %s (epoch %d)\n", percent_text(s.best_validation_accuracy).c_str(),
                  s.best_epoch);
      std::printf("  final validation accuracy  %s   loss %.4f\n", percent_text(s.final_validation_accuracy).c_str(),
                  s.final_validation_loss);
    } else {
      std::printf("  validation                 none (the run had no validation images)\n");
    }
    // Over every training step, the first slow ones included: below the steady speed "where the time went" gives.
    std::printf("  epochs                     %d of %d, mean %s, %s images/s over all their training steps\n",
                s.epochs_completed, r.epochs, duration_text(s.mean_epoch_seconds).c_str(),
                std::isnan(s.mean_images_per_second) ? "-" : fixed_text(s.mean_images_per_second, 1).c_str());
    std::printf("  skipped steps              %lld   final loss scale %s   peak memory %s\n",
                static_cast<long long>(s.skipped_steps), loss_scale_text(s.final_loss_scale, scaled).c_str(),
                mebibytes_text(s.peak_bytes).c_str());
  } else {
    std::printf("  no epoch completed\n");
  }
  print_time_breakdown(r, run_timing(r, store.steps(r.id), times));
  print_overflows(overflows);
  print_layer_numerics(store.layer_numerics(r.id));
  print_divergence(r, store.divergence(r.id));
  if (!checkpoints.empty()) {
    std::printf("\ncheckpoints%s\n",
                store.resumable(r.id) ? " (the last resumes the run: ampwb train --resume RUN)" : "");
    for (const CheckpointInfo& c : checkpoints) {
      // Written at the end, it resumes at an epoch past the last: where it stands is that epoch's end.
      const std::string at = c.resume_epoch > r.epochs ? "end of epoch " + std::to_string(r.epochs)
                                                       : "resumes at epoch " + std::to_string(c.resume_epoch) +
                                                             ", after " + std::to_string(c.step) + " steps of the run";
      std::printf("  %s: %s%s\n", at.c_str(), c.path.c_str(), on_disk(c) ? "" : " (removed)");
    }
  }
  return 0;
}

struct CompareOptions {
  std::vector<std::string> runs;
  std::string db;
  std::string group_by;  // a configuration key, or "all-but-seed"
  bool json = false;
};

// --group-by: each group of runs sharing the key's value, with the mean ± std of the results over its runs.
std::vector<std::pair<ConfigGroup, std::vector<GroupMetric>>> compare_groups(const std::vector<ComparedRun>& runs,
                                                                             const Comparison& cmp,
                                                                             const std::string& key) {
  std::vector<TrainConfig> configs;
  for (const ComparedRun& r : runs) configs.push_back(r.record.config);
  std::vector<std::pair<ConfigGroup, std::vector<GroupMetric>>> out;
  for (const ConfigGroup& g : group_configs(configs, key))
    out.emplace_back(g, group_metrics(cmp.summaries, cmp.speeds(), g));
  return out;
}

int compare_command(const CompareOptions& options) {
  RunStore store = open_for_reading(store_path(options.db), "compare");
  const std::vector<int64_t> ids = resolve_runs(store, options.runs, "compare");
  if (ids.size() < 2) throw Error("compare needs two or more runs, got only run " + std::to_string(ids.front()));
  const std::vector<ComparedRun> runs = load_compared_runs(store, ids);
  const Comparison cmp = compare_runs(runs);  // the rows the GUI's comparison shows too
  // Each run's step time by class against the first run's.
  std::vector<TimeComparison> by_class;
  for (size_t i = 1; i < cmp.timings.size(); ++i) by_class.push_back(compare_times(cmp.timings[0], cmp.timings[i]));
  const std::string group_key = options.group_by == "all-but-seed" ? kAllButSeed : options.group_by;
  const auto groups = group_key.empty() ? std::vector<std::pair<ConfigGroup, std::vector<GroupMetric>>>{}
                                        : compare_groups(runs, cmp, group_key);

  if (options.json) {
    json out = {
        {"runs", json::array()}, {"differences", json::object()}, {"rows", json::array()}, {"at_epoch", cmp.at_epoch}};
    for (size_t i = 0; i < runs.size(); ++i) {
      json j = cmp.summaries[i];
      j["id"] = runs[i].record.id;
      j["name"] = runs[i].record.name;
      j["status"] = runs[i].record.status;
      j["speed"] = {{"images_per_second", cmp.timings[i].speed.images_per_second()},
                    {"images_per_second_q1", cmp.timings[i].speed.images_per_second_q1()},
                    {"images_per_second_q3", cmp.timings[i].speed.images_per_second_q3()},
                    {"steps", cmp.timings[i].speed.steps}};
      j["speedup"] = {{"ratio", cmp.speedups[i].ratio},
                      {"low", cmp.speedups[i].low},
                      {"high", std::isinf(cmp.speedups[i].high) ? json(nullptr) : json(cmp.speedups[i].high)},
                      {"distinguishable", cmp.speedups[i].distinguishable()},
                      {"text", speed_up_text(cmp.speedups[i])}};
      write_fields(j["machine_load"], mean_epoch_times(runs[i].times).load);
      out["runs"].push_back(j);
    }
    for (const CompareRow& row : cmp.rows) {
      out["rows"].push_back(
          {{"label", row.label}, {"values", row.values}, {"setting", row.setting}, {"differs", row.differs}});
      if (!row.note.empty()) out["rows"].back()["note"] = row.note;
      if (row.setting && row.differs) out["differences"][row.label] = row.values;
    }
    out["timing_warning"] = cmp.timing_warning;
    out["work_warning"] = cmp.work_warning;
    out["time"] = json::array();
    for (size_t i = 0; i < by_class.size(); ++i) {
      const TimeComparison& t = by_class[i];
      json j = {{"baseline", runs[0].record.id},  {"run", runs[i + 1].record.id}, {"available", t.available},
                {"unavailable", t.unavailable()}, {"sentence", t.sentence},       {"rows", json::array()}};
      for (const TimeRow& row : t.rows)
        j["rows"].push_back({{"label", row.label}, {"ms", row.ms}, {"share", row.share}, {"speedup", row.speedup}});
      out["time"].push_back(j);
    }
    if (!group_key.empty()) {
      out["groups"] = json::array();
      for (const auto& group : groups) {
        json j = {{"key", group_key},
                  {"value", group.first.value},
                  {"label", group_label(group_key, group.first)},
                  {"runs", json::array()},
                  {"metrics", json::object()}};
        for (size_t i : group.first.members) j["runs"].push_back(runs[i].record.id);
        for (const GroupMetric& m : group.second) j["metrics"][m.metric] = {{"mean", m.mean}, {"std", m.std}};
        out["groups"].push_back(j);
      }
    }
    print_json(out);
    return 0;
  }

  std::vector<std::string> header{""};
  for (const ComparedRun& r : runs) header.push_back(run_label(r.record));
  std::vector<bool> right(runs.size() + 1, true);
  right[0] = false;  // the labels
  Table settings(header), results(header, right);
  for (const CompareRow& row : cmp.rows) {
    if (row.setting && !row.differs) continue;  // settings: only those that differ
    std::vector<std::string> cells{row.label};
    cells.insert(cells.end(), row.values.begin(), row.values.end());
    (row.setting ? settings : results).add(std::move(cells));
  }
  std::printf("configuration differences\n");
  if (settings.rows() == 0)
    std::printf("  (none: the runs share every setting)\n");
  else
    settings.print("  ");
  std::printf("\nresults\n");
  results.print("  ");
  for (const CompareRow& row : cmp.rows)
    if (!row.note.empty()) print_wrapped(row.label + ": " + row.note, "  ", "    ");
  for (const std::string& warning : {cmp.work_warning, cmp.timing_warning})
    if (!warning.empty()) print_wrapped(warning, "  ", "    ");
  for (size_t i = 0; i < by_class.size(); ++i) {
    const TimeComparison& t = by_class[i];
    const RunRecord &a = runs[0].record, &b = runs[i + 1].record;
    std::printf(
        "\nwhere the time went, %s against %s (ms per step: each run's median steady step, split by the "
        "timed steps' shares)\n",
        run_label(b).c_str(), run_label(a).c_str());
    if (!t.available) {
      std::printf("  (%s)\n", t.unavailable().c_str());
      continue;
    }
    Table table({"", run_label(a), "SHARE", run_label(b), "SHARE", "SPEED-UP"}, {false, true, true, true, true, true});
    for (const TimeRow& row : t.rows)
      table.add({row.label, ms_text(row.ms[0]), percent_text(row.share[0]), ms_text(row.ms[1]),
                 percent_text(row.share[1]), speedup_text(row.speedup)});
    table.print("  ");
    std::printf("  %s\n", t.sentence.c_str());
  }
  if (!groups.empty()) {
    std::printf("\ngroups by %s (mean ± sample std over each group's runs)\n",
                group_key == kAllButSeed ? kAllButSeed : key_label(group_key).c_str());
    std::vector<std::string> group_header{""};
    for (const auto& group : groups) group_header.push_back(group_label(group_key, group.first));
    std::vector<bool> right(group_header.size(), true);
    right[0] = false;  // the metrics' names
    Table table(group_header, right);
    for (size_t m = 0; m < groups[0].second.size(); ++m) {
      std::vector<std::string> cells{groups[0].second[m].metric};
      for (const auto& group : groups) cells.push_back(mean_std_text(group.second[m]));
      table.add(std::move(cells));
    }
    table.print("  ");
  }
  return 0;
}

}  // namespace

void add_run_commands(CLI::App& app, Invocation& invocation) {
  auto runs_options = std::make_shared<RunsOptions>();
  CLI::App* runs = app.add_subcommand("runs", "list the recorded runs");
  runs->add_option("--status", runs_options->status,
                   "only runs with this status (paused: running runs their user has paused; running: all running)")
      ->type_name("running|paused|finished|failed|stopped|interrupted")
      ->transform(
          [](std::string word) { return word == "cancelled" ? std::string("stopped") : word; })  // --json's word
      ->check(CLI::IsMember({"running", "paused", "finished", "failed", "stopped", "interrupted"}).description(""));
  runs->add_option("--tag", runs_options->tag, "only runs with this tag, whatever its case")->type_name("TAG");
  runs->add_flag("--json", runs_options->json, "as JSON (for scripts)");
  add_db_option(runs, runs_options->db);
  run_on_parse(runs, invocation, runs_options, runs_command);

  auto show_options = std::make_shared<ShowOptions>();
  CLI::App* show = app.add_subcommand(
      "show",
      "a run's configuration, epochs, summary, time by class, overflows, layers, precision divergence and checkpoints");
  show->add_option("RUN", show_options->run, "a run id or a unique run name")->type_name("")->required();
  CLI::Option* show_json = show->add_flag("--json", show_options->json, "as JSON (for scripts)");
  show->add_flag("--steps", show_options->steps, "with --json: every step too")->needs(show_json);
  add_db_option(show, show_options->db);
  run_on_parse(show, invocation, show_options, show_command);

  auto compare_options = std::make_shared<CompareOptions>();
  CLI::App* compare = app.add_subcommand("compare", "runs side by side: differing settings, results, speed-up");
  compare
      ->add_option("RUN", compare_options->runs,
                   "two or more run ids or names, or sweep:N for a sweep's runs; speed-ups are against the first")
      ->type_name("")
      ->default_str("")
      ->required()
      ->expected(1, -1)
      ->multi_option_policy(CLI::MultiOptionPolicy::Throw);  // the policy that checks the count (TakeLast would not)
  // One argument names two runs or more only as a sweep: one run alone is a usage error, as CLI11's count makes it.
  compare->parse_complete_callback([compare_options] {
    const std::vector<std::string>& runs = compare_options->runs;
    if (runs.size() == 1 && runs[0].rfind("sweep:", 0) != 0)
      throw CLI::ValidationError("RUN", "At least 2 required (or one sweep:N)");
  });
  compare
      ->add_option("--group-by", compare_options->group_by,
                   "group the runs by a configuration key's value (as ampwb show lists them: precision.mode or "
                   "precision, batch_size, lr, seed, ...) or all-but-seed, and print each group's mean ± std of the "
                   "results (the mean alone for a group of one run)")
      ->type_name("KEY");
  compare->add_flag("--json", compare_options->json, "as JSON (for scripts)");
  add_db_option(compare, compare_options->db);
  run_on_parse(compare, invocation, compare_options, compare_command);
}

}  // namespace ampwb::cli
