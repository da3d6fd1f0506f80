// A self-contained HTML report of one or more stored runs (`ampwb report`): the comparison table and the
// configuration differences, the charts inline as SVG, each run's diagnosis, time breakdown, per-layer heat map,
// overflows, and the machine and versions it ran on. One file, no scripts, no external resources: it opens in any
// browser and prints to PDF. Every text from the store (run, class and layer names) is escaped.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "store/run_store.h"

namespace ampwb {

// The report of `ids` (the first is the baseline of speed-ups and of the diagnosis); throws naming a missing run.
// colours[i], where given, is run ids[i]'s colour (run_colour), as the workbench drew it; by default its place.
std::string html_report(const RunStore& store, const std::vector<int64_t>& ids,
                        const std::vector<size_t>& colours = {});

// Text made safe for HTML and SVG content and attribute values: & < > " ' escaped.
std::string html_escape(const std::string& text);

}  // namespace ampwb
