// The precision divergence as people read it, the same in `ampwb show`, the report and the GUI: why a run has none,
// and what each layer's row notes.
#pragma once

#include <string>

#include "store/run_record.h"
#include "train/run_details.h"

namespace ampwb {

// Why a stored run has no precision divergence: its mode computes in FP32, TF32 is not measured, or it did not
// finish (the divergence is measured once, at the end of a finished run).
std::string divergence_absence(const RunRecord& run);

// "first departure", "largest growth (3.2x)", both, or empty: the note of a layer's row.
std::string divergence_layer_note(const PrecisionDivergence& d, const LayerDivergence& layer);

// "4 units of BF16 rounding (u = 2^-8): 1.56e-02" -- the line the table's activation errors are read against.
std::string divergence_threshold_text(const PrecisionDivergence& d);

}  // namespace ampwb
