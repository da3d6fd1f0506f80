// Mean ± standard deviation of a per-epoch metric over several runs (runs that differ only by seed): the bands
// of a comparison. Only epochs every run completed count. Plain C++.
#pragma once

#include <cmath>
#include <functional>
#include <map>
#include <vector>

#include "run_series.h"

namespace ampwb::ui {

struct EpochBand {
  int epoch = 0;
  double mean = 0, std = 0;  // sample standard deviation (n - 1)
};
struct EpochBands {
  std::vector<EpochBand> points;
};

template <class RunPtrs>
EpochBands epoch_bands(const RunPtrs& runs, const std::function<double(const EpochReport&)>& metric) {
  std::map<int, std::vector<double>> by_epoch;
  for (const auto* run : runs)
    for (const EpochReport& e : run->epochs) by_epoch[e.epoch].push_back(metric(e));
  EpochBands out;
  for (const auto& [epoch, values] : by_epoch) {
    if (values.size() != runs.size() || values.size() < 2) continue;
    double sum = 0;
    for (double v : values) sum += v;
    const double mean = sum / values.size();
    double ss = 0;
    for (double v : values) ss += (v - mean) * (v - mean);
    out.points.push_back({epoch, mean, std::sqrt(ss / (values.size() - 1))});
  }
  return out;
}

}  // namespace ampwb::ui
