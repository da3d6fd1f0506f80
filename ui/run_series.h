// The plain data model every chart draws from: one run's configuration, steps, epochs, histograms and per-layer
// numerics. A live run
// grows it batch by batch; a stored run is loaded from the run store. Charts only read it. No Qt types.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/diagnosis.h"
#include "event_queue.h"
#include "store/run_record.h"
#include "store/run_store.h"
#include "train/config.h"
#include "train/events.h"
#include "train/topk.h"

namespace ampwb::ui {

struct RunSeries {
  int64_t run_id = 0;  // 0 while a live run has no stored row yet
  std::string label;   // the legend entry, e.g. "12 · amp-fp16"
  TrainConfig config;
  RunStatus status = RunStatus::Running;
  int64_t steps_per_epoch = 0;
  int first_epoch = 1;
  int64_t classes = 0;             // the dataset's; 0 until the run has started
  std::vector<std::string> notes;  // RunInfo::notes
  std::vector<StepReport> steps;
  std::vector<EpochReport> epochs;
  std::vector<GradientHistogram> histograms;
  std::vector<LayerNumerics> layer_numerics;      // every probed step's layers, in step order
  std::optional<PrecisionDivergence> divergence;  // measured at the end of a finished low-precision run
  // Its colour among the runs drawn (chart_style.h's run_color), where it keeps one it had before others left the
  // comparison; -1: its position's.
  int colour = -1;
  uint64_t revision = 0;        // bumped by every change, so charts skip redrawing what they already show
  uint64_t epoch_revision = 0;  // bumped when epochs, histograms, numerics or the run's state change (not by steps)

  // Adds a live batch. A resumed run reports again from its checkpoint: what it reports replaces what was there.
  void append(const EventBatch& batch);
  // Becomes `other` (another run in the same object), its revisions above any this one had, so a chart that drew
  // the old run never mistakes the new one for what it already shows.
  void replace_with(RunSeries other);
  int colour_index(size_t position) const { return colour >= 0 ? colour : static_cast<int>(position); }
  // Whether its top-k accuracy means something (train/topk.h), runs recorded before the engine left one out too.
  bool reports_topk() const { return topk_meaningful(config.topk, classes); }
  // The x position of the end of `epoch` on a per-step axis.
  double epoch_end_step(int epoch) const;
};

// A stored run as a series (everything the store holds for it).
RunSeries load_run_series(const RunStore& store, int64_t id);
// The same from what was read of the run (load_evidence, or load_charted_evidence).
RunSeries run_series(const RunEvidence& run);
// "12 · amp-fp16" (id, then the name when it is not just the mode); "12 · fp32 · seed 0" for a run of an older
// sweep, named by its time ("sweep 1201-135804 fp32").
std::string run_label(const RunRecord& record);

// Runs that share every setting but the seed (and settings that leave the curves alone): mean ± std applies.
bool differ_only_by_seed(const std::vector<TrainConfig>& configs);

}  // namespace ampwb::ui
