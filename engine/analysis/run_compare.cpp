// The comparison of runs (run_compare.h): results rows from each run's summary, epochs and gradient histograms,
// settings rows from the configuration's field list.
#include "analysis/run_compare.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <set>

#include "analysis/diagnosis.h"
#include "analysis/numerics_grid.h"
#include "analysis/report_text.h"

namespace ampwb {
namespace {

const EpochReport* epoch_at(const std::vector<EpochReport>& epochs, int epoch) {
  for (const EpochReport& e : epochs)
    if (e.epoch == epoch) return &e;
  return nullptr;
}

// The histogram of `kind` from the run's last recorded epoch.
const GradientHistogram* last_histogram(const std::vector<GradientHistogram>& histograms, const std::string& kind) {
  const GradientHistogram* found = nullptr;
  for (const GradientHistogram& h : histograms)
    if (h.kind == kind && (!found || h.epoch >= found->epoch)) found = &h;
  return found;
}

std::string g_text(const char* format, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, value);
  return buf;
}

// The note of a speed-up row where the load made a cell's timing unreliable; the warning below the table says how.
constexpr const char* kUnreliableNote = ". \u26a0: timed while the machine did other work (the warning says how)";

}  // namespace

std::vector<ComparedRun> load_compared_runs(const RunStore& store, const std::vector<int64_t>& ids) {
  std::vector<ComparedRun> runs;
  for (int64_t id : ids) {
    runs.push_back({store.run(id),
                    store.epochs(id),
                    store.histograms(id),
                    store.steps(id),
                    store.epoch_times(id),
                    store.alternating_speed(id),
                    {}});
    if (runs.back().record.config.precision.mode == PrecisionMode::AmpFp8)
      runs.back().layers = store.layer_numerics(id);
  }
  return runs;
}

RunTiming run_timing(const RunRecord& record, const std::vector<StepReport>& steps, std::vector<EpochTimes> times) {
  return {std::move(times), measure_speed(steps, record.global_batch_size(), record.config.numerics_every)};
}

std::vector<RunSpeed> Comparison::speeds() const {
  std::vector<RunSpeed> out;
  for (const RunTiming& t : timings) out.push_back(t.speed);
  return out;
}

Comparison compare_runs(const std::vector<ComparedRun>& runs, const CompareOptions& options) {
  Comparison c;
  const size_t n = runs.size();
  for (const ComparedRun& r : runs) c.summaries.push_back(summarize(r.record, r.epochs));
  c.baseline = n ? std::min(options.baseline, n - 1) : 0;
  std::vector<RunLoad> loads;
  for (const ComparedRun& r : runs) {
    c.timings.push_back(run_timing(r.record, r.steps, r.times));
    loads.push_back({r.record.id, mean_epoch_times(r.times).load});
  }
  for (const RunTiming& t : c.timings) c.speedups.push_back(speed_up(t.speed, c.timings[c.baseline].speed));
  c.timing_warning = timing_warning(loads);
  for (size_t i = 0; i < n; ++i)
    if (const std::string d = i == c.baseline ? "" : work_difference(runs[i].record, runs[c.baseline].record);
        !d.empty())
      c.work_warning += (c.work_warning.empty() ? "speed-ups not the precision's alone: run " : "; run ") +
                        std::to_string(runs[i].record.id) + " against run " +
                        std::to_string(runs[c.baseline].record.id) + ": " + d;
  int common = 0;
  for (size_t i = 0; i < n; ++i)
    common = i == 0 ? c.summaries[i].epochs_completed : std::min(common, c.summaries[i].epochs_completed);
  c.at_epoch = options.at_epoch > 0 ? options.at_epoch : std::max(1, common);

  auto add = [&](const std::string& label, const std::function<std::string(size_t)>& cell, bool setting = false) {
    CompareRow row{label, {}, setting, false, {}};
    for (size_t i = 0; i < n; ++i) row.values.push_back(cell(i));
    row.differs = std::any_of(row.values.begin(), row.values.end(), [&](const auto& v) { return v != row.values[0]; });
    c.rows.push_back(std::move(row));
  };
  // The last row's note, where one of its cells holds what the note explains.
  auto note_where = [&](const std::string& mark, const std::string& note) {
    CompareRow& row = c.rows.back();
    if (std::any_of(row.values.begin(), row.values.end(), [&](const auto& v) { return v.find(mark) != v.npos; }))
      row.note += (row.note.empty() ? "" : "; ") + note;
  };
  // A result of a run that completed an epoch; "-" for one that did not.
  auto completed = [&](const std::function<std::string(const RunSummary&)>& cell) {
    return [&c, cell](size_t i) { return c.summaries[i].epochs_completed ? cell(c.summaries[i]) : std::string("-"); };
  };
  const int at = c.at_epoch;

  // One row, so that the GUI's short table shows results from its third row: "stopped, 1/3 epochs".
  add("status", [&](size_t i) {
    return run_state_words(runs[i].record) + ", " + std::to_string(c.summaries[i].epochs_completed) + "/" +
           std::to_string(runs[i].record.epochs) + " epochs";
  });
  // A validation result of a run that measured validation; "-" for one without validation images.
  auto validated = [&](const std::function<std::string(size_t)>& cell) {
    return [&runs, cell](size_t i) { return runs[i].record.info.validation_images > 0 ? cell(i) : std::string("-"); };
  };
  add("best validation accuracy", completed([](const RunSummary& s) {
        return s.best_epoch ? percent_text(s.best_validation_accuracy) + " (epoch " + std::to_string(s.best_epoch) + ")"
                            : std::string("-");
      }));
  add("final validation accuracy",
      validated(completed([](const RunSummary& s) { return percent_text(s.final_validation_accuracy); })));
  add("validation accuracy at epoch " + std::to_string(at), validated([&](size_t i) {
        const EpochReport* e = epoch_at(runs[i].epochs, at);
        return e ? percent_text(e->validation_accuracy) : std::string("-");
      }));
  // Where some run reports one (none does where k covers every class).
  if (std::any_of(runs.begin(), runs.end(), [](const ComparedRun& r) {
        return std::any_of(r.epochs.begin(), r.epochs.end(),
                           [&r](const EpochReport& e) { return topk_reported(r.record, e); });
      }))
    add("validation top-k at epoch " + std::to_string(at), validated([&](size_t i) {
          const EpochReport* e = epoch_at(runs[i].epochs, at);
          return e && topk_reported(runs[i].record, *e)
                     ? percent_text(e->validation_topk) + " (top-" + std::to_string(e->topk) + ")"
                     : std::string("-");
        }));
  add("final validation loss",
      validated(completed([](const RunSummary& s) { return fixed_text(s.final_validation_loss, 4); })));
  add("validation loss at epoch " + std::to_string(at), validated([&](size_t i) {
        const EpochReport* e = epoch_at(runs[i].epochs, at);
        return e ? fixed_text(e->validation_loss, 4) : std::string("-");
      }));
  add("final training loss", completed([](const RunSummary& s) { return fixed_text(s.final_train_loss, 4); }));
  add("total time", [&](size_t i) { return duration_text(c.summaries[i].total_seconds); });
  add("mean epoch time", [&](size_t i) { return duration_text(c.summaries[i].mean_epoch_seconds); });
  // A run that trained an epoch without steady-state steps says why it has no speed, rather than a dash read as "not
  // recorded"; one that ended before, failed or stopped, has a dash.
  constexpr const char* kTooFewSteps = "- (too few steps)";
  const auto no_speed = [&](size_t i) { return std::string(c.summaries[i].epochs_completed ? kTooFewSteps : "-"); };
  add("training speed (steady state)",
      [&](size_t i) { return c.timings[i].speed.known() ? speed_cell(c.timings[i].speed) : no_speed(i); });
  note_where("(IQR",
             "the median speed of the run's steady-state steps, and in brackets their interquartile range "
             "(IQR), where the middle half of them fell");
  const std::string too_few_steps_note =
      "too few steps: a steady speed leaves out a run's first " + std::to_string(kWarmupSteps) +
      " steps and each epoch's first and last, and none were left; train on more images or for more epochs";
  note_where(kTooFewSteps, too_few_steps_note);
  if (n > 1) {  // a run alone has nothing to be faster than
    // A ratio timed under other work carries the warning's sign, so that the cell read alone keeps its caveat: where
    // the run or the baseline was busy (the warning names them), or, where none was, their loads differ.
    const auto busy = [&](size_t i) { return !timing_warning({loads[i]}).empty(); };
    bool any_busy = false;
    for (size_t i = 0; i < n; ++i) any_busy = any_busy || busy(i);
    bool marked = false;
    add("speed-up vs run " + std::to_string(runs[c.baseline].record.id), [&](size_t i) {
      if (i == c.baseline) return std::string("baseline");
      if (!c.timings[i].speed.known()) return no_speed(i);
      if (!c.timings[c.baseline].speed.known()) return std::string("- (too few steps in the baseline)");
      const bool unreliable =
          c.speedups[i].known() &&
          (busy(i) || busy(c.baseline) || (!any_busy && !timing_warning({loads[i], loads[c.baseline]}).empty()));
      marked = marked || unreliable;
      return speed_up_cell(c.speedups[i]) + (unreliable ? " \u26a0" : "");
    });
    note_where("(too few steps", too_few_steps_note);
    note_where("\u00d7",
               "the ratio of the runs' steady-state speeds, and in brackets its 95% interval, a bootstrap "
               "over blocks of consecutive steps of both runs; \"within noise\": the interval holds 1.0\u00d7, "
               "inside their own step-to-step noise. The runs trained at different times or places: an "
               "interval without 1.0\u00d7 can still be the machine's drift between them, which only timing "
               "them in alternation (a sweep run here) evens out");
    if (marked) c.rows.back().note += kUnreliableNote;
  }
  add("machine load while training", [&](size_t i) { return machine_load_cell(loads[i].load); });
  note_where("steal",
             "the mean over its epochs of the share of the CPUs' time other programs used and of the share "
             "a virtual machine's host gave to other guests (steal), with the CPUs' clock where the machine "
             "shows it, and on a GPU its clock and the other processes using it");
  // A sweep's speed-up, timed in alternation after its trainings: shown where a run and the baseline were timed so.
  const int64_t base_id = n ? runs[c.baseline].record.id : 0;
  std::vector<std::string> timed_together(n, "-");
  c.alternating.assign(n, SpeedUp{});
  std::set<std::string> timings, loaded;  // how they were timed, and under what load, said once
  for (size_t i = 0; i < n; ++i)
    if (const auto& timed = runs[i].alternating; timed && i != c.baseline)
      if (const SpeedUp s = alternating_speed_up(*timed, runs[i].record.id, base_id); s.known()) {
        const std::string warning = alternation_warning(*timed);
        timed_together[i] = speed_up_cell(s) + (warning.empty() ? "" : " \u26a0");
        c.alternating[i] = s;
        timings.insert(std::to_string(timed->images_per_second.front().size()) + " rounds of " +
                       std::to_string(timed->steps_per_round) + " steps on " + timed->data);
        if (!warning.empty()) loaded.insert(warning);
      }
  for (const std::string& warning : loaded)
    c.timing_warning += (c.timing_warning.empty() ? "timings unreliable: " : "; ") + warning;
  if (!timings.empty()) {
    timed_together[c.baseline] = "baseline";
    add("speed-up vs run " + std::to_string(base_id) + ", timed in alternation (sweep)",
        [&](size_t i) { return timed_together[i]; });
    std::string how;
    for (const std::string& t : timings) how += (how.empty() ? "" : "; ") + t;
    c.rows.back().note = "timed after the sweep, the runs taking turns (" + how +
                         "): the median of the rounds' ratios, and in brackets the smallest ratio to the largest, "
                         "which holds the median with probability 1 - 2^(1 - rounds), 97% for 6 rounds; \"within "
                         "noise\": that range holds 1.0\u00d7. Where it differs from the speed-up of the trainings' "
                         "own steps, this is the figure to go by (unless marked \u26a0): the trainings ran at "
                         "different times, whose drift the alternation evens out";
    if (!loaded.empty()) c.rows.back().note += kUnreliableNote;
  }
  add("skipped steps", [&](size_t i) { return std::to_string(c.summaries[i].skipped_steps); });
  add("final loss scale", [&](size_t i) {
    const bool scaled = runs[i].record.config.precision.scales_loss();
    return completed([scaled](const RunSummary& s) { return loss_scale_text(s.final_loss_scale, scaled); })(i);
  });
  add("peak memory", [&](size_t i) { return mebibytes_text(c.summaries[i].peak_bytes); });
  // What FP8 clipped and made zero at an amp-fp8 run's last probed step: its worst tensor's share, as the heat map
  // colours a layer.
  if (std::any_of(runs.begin(), runs.end(),
                  [](const ComparedRun& r) { return r.record.config.precision.mode == PrecisionMode::AmpFp8; }))
    for (const NumericsMeasure m : {NumericsMeasure::Fp8Saturated, NumericsMeasure::Fp8Underflow}) {
      add(m == NumericsMeasure::Fp8Saturated ? "FP8 clipped, worst tensor (last probed step)"
                                             : "FP8 made zero, worst tensor (last probed step)",
          [&](size_t i) {
            double worst = std::numeric_limits<double>::quiet_NaN();  // "-": no FP8 tensor
            for (const LayerNumerics* n : last_probed_layers(runs[i].layers))
              if (const double share = numerics_measure(*n, m); share >= 0)
                worst = std::isnan(worst) ? share : std::max(worst, share);
            return percent_text(worst);
          });
      c.rows.back().note = m == NumericsMeasure::Fp8Saturated
                               ? "the largest share of any FP8 tensor's values clipped to its format's largest "
                                 "value at the run's last probed step (ampwb show lists each tensor)"
                               : "the largest share of any FP8 tensor's nonzero values made zero at the run's last "
                                 "probed step (ampwb show lists each tensor)";
    }
  // What FP16 storage would lose of the last gradients each run recorded (the histogram chart's fractions).
  for (const std::string kind : {"weight", "activation"}) {
    add("FP16 underflow, " + kind + " gradients (last epoch)", [&](size_t i) {
      const GradientHistogram* h = last_histogram(runs[i].histograms, kind);
      if (!h) return std::string("-");
      const std::string underflow = g_text("%.3g%%", 100 * h->underflow_fraction);
      // Activation gradients that were FP16 already lost what underflows: their share below 2^-14 says how close.
      if (kind == "activation" && mode_info(runs[i].record.config.precision.mode).format == NumberFormat::Fp16)
        return underflow + " (" + g_text("%.3g%%", 100 * below_fp16_normal_share(*h)) + " below 2^-14)";
      return underflow;
    });
    note_where("%",
               "the share of the last recorded gradients FP16 would flush to zero, each run's as its loss scale "
               "multiplied them: an FP32 run's (scale 1) is what FP16 would lose without loss scaling");
    note_where("below 2^-14",
               "a run whose activation gradients are already FP16 shows 0% and, in brackets, their share below "
               "2^-14 (FP16's smallest normal number), how near they come");
    add("FP16 overflow, " + kind + " gradients (last epoch)", [&](size_t i) {
      const GradientHistogram* h = last_histogram(runs[i].histograms, kind);
      return h ? g_text("%.3g%%", 100 * h->overflow_fraction) : std::string("-");
    });
  }

  // Every setting of the configuration (not the run's name, nor where its checkpoints went), then where it ran and
  // on what data.
  std::vector<std::vector<std::pair<std::string, std::string>>> settings(n);
  for (size_t i = 0; i < n; ++i) {
    const RunRecord& r = runs[i].record;
    settings[i] = run_settings(r);
    settings[i].emplace_back("(device)", r.backend);
    // The processes that trained it together: each took batch_size images a step (the global batch is theirs summed).
    settings[i].emplace_back("(processes)", r.info.world_size == 1
                                                ? std::string("1")
                                                : std::to_string(r.info.world_size) + ", started by " +
                                                      choice_name(r.info.launcher) + ": " +
                                                      std::to_string(r.global_batch_size()) + " images a step in all");
    settings[i].emplace_back("(dataset fingerprint)", runs[i].record.dataset_fingerprint);
  }
  if (n)
    for (size_t k = 0; k < settings[0].size(); ++k)
      if (const std::string& key = settings[0][k].first;
          key != "name" && key != "checkpoint_dir" && key != "keep_checkpoints")
        add(
            settings[0][k].first, [&](size_t i) { return settings[i][k].second; }, true);
  return c;
}

}  // namespace ampwb
