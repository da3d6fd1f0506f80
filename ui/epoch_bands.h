// Mean ± standard deviation of a per-epoch metric over a group of runs (run_groups.h: runs sharing a configuration
// key's value, or everything but the seed): the bands of a comparison. Only epochs every run completed count. Plain
// C++.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <vector>

#include "run_series.h"

namespace ampwb::ui {

struct EpochBand {
  int epoch = 0;
  double mean = 0, std = 0;  // sample standard deviation (n - 1); 0 for one run
};
struct EpochBands {
  std::vector<EpochBand> points;
};

// `min_runs`: fewer runs give no points (a group of one run draws its line; the old seed-only band needed two).
template <class RunPtrs>
EpochBands epoch_bands(const RunPtrs& runs, const std::function<double(const EpochReport&)>& metric,
                       size_t min_runs = 2) {
  std::map<int, std::vector<double>> by_epoch;
  for (const auto* run : runs)
    for (const EpochReport& e : run->epochs) by_epoch[e.epoch].push_back(metric(e));
  EpochBands out;
  for (const auto& [epoch, values] : by_epoch) {
    if (values.size() != runs.size() || values.size() < std::max<size_t>(1, min_runs)) continue;
    double sum = 0;
    for (double v : values) sum += v;
    const double mean = sum / values.size();
    double ss = 0;
    for (double v : values) ss += (v - mean) * (v - mean);
    out.points.push_back({epoch, mean, values.size() > 1 ? std::sqrt(ss / (values.size() - 1)) : 0.0});
  }
  return out;
}

}  // namespace ampwb::ui
