// The comparison of two runs' step time by class, in rows and in a sentence.
#include "analysis/time_comparison.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace ampwb {
namespace {

constexpr double kUnchanged = 0.05;     // ratios within ±5% read as unchanged
constexpr double kMentionShare = 0.05;  // a group is named when it holds 5% of either step

std::string label_of(TimeClass c) {
  std::string s = time_class_name(c);
  std::replace(s.begin(), s.end(), '_', ' ');
  return s;
}

double share(double part, double whole) { return whole > 0 ? part / whole : 0; }
double ratio(double a, double b) { return a > 0 && b > 0 ? a / b : 0; }

// "1.9×", "12×"
std::string times_text(double r) {
  char buf[32];
  std::snprintf(buf, sizeof buf, r < 9.95 ? "%.1f\u00d7" : "%.0f\u00d7", r);
  return buf;
}

std::string percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f%%", 100 * fraction);
  return buf;
}

// "faster"/"slower"/"unchanged" for a time that went from a to b.
std::string change_text(double a, double b) {
  const double r = ratio(a, b);
  if (std::abs(r - 1) <= kUnchanged) return "unchanged";
  return r > 1 ? times_text(r) + " faster" : times_text(1 / r) + " slower";
}

struct Group {
  const char* name;
  std::vector<TimeClass> classes;
};

const std::vector<Group>& groups() {
  using C = TimeClass;
  static const std::vector<Group> g = {
      {"convolutions", {C::ConvForward, C::ConvBackwardData, C::ConvBackwardWeights}},
      {"batch norm", {C::BatchNorm}},
      {"elementwise", {C::Relu, C::Add}},
      {"pooling", {C::Pooling}},
      {"linear", {C::Linear}},
      {"loss", {C::Loss}},
      {"optimizer", {C::Optimizer}},
      {"scale check", {C::ScaleCheck}},
      {"conversions", {C::Convert}},
      {"host waits", {C::HostWait}},
  };
  return g;
}

double group_seconds(const EpochTimes& t, const Group& g) {
  double s = 0;
  for (TimeClass c : g.classes) s += t.op_seconds[static_cast<size_t>(c)];
  return s;
}

}  // namespace

EpochTimes mean_epoch_times(const std::vector<EpochTimes>& epochs) {
  EpochTimes mean;
  double loaded = 0, other_cpu = 0, steal = 0, mhz = 0;  // step-weighted sums over the epochs that recorded a load
  double gpu_timed = 0, gpu_mhz = 0, gpu_max_mhz = 0;    // over the epochs that read their GPU
  int gpu_others = -1;                                   // the most other processes any epoch saw on it
  // The load of every epoch, the first's included: the run's epoch times and total time hold it too, and a slow
  // first epoch beside other work (on the CPU or the GPU) must not be said to have trained on a quiet machine.
  for (const EpochTimes& e : epochs) {
    const double n = static_cast<double>(e.steps);
    if (e.load.known()) {
      loaded += n;
      other_cpu += n * e.load.other_cpu, steal += n * std::max(0.0, e.load.steal), mhz += n * e.load.cpu_mhz;
    }
    if (e.load.gpu_mhz > 0) {
      gpu_timed += n, gpu_mhz += n * e.load.gpu_mhz, gpu_max_mhz = std::max(gpu_max_mhz, e.load.gpu_max_mhz);
      gpu_others = std::max(gpu_others, e.load.gpu_other_processes);
    }
  }
  const size_t first = epochs.size() > 1 ? 1 : 0;
  for (size_t i = first; i < epochs.size(); ++i) {
    const EpochTimes& e = epochs[i];
    const double n = static_cast<double>(e.steps);
    mean.epoch = e.epoch;
    mean.steps += e.steps;
    mean.step_seconds += n * e.step_seconds;
    mean.data_wait_seconds += n * e.data_wait_seconds;
    mean.communication_seconds += n * e.communication_seconds;
    mean.communication_wait_seconds += n * e.communication_wait_seconds;
    for (size_t c = 0; c < kTimeClassCount; ++c) mean.op_seconds[c] += n * e.op_seconds[c];
    mean.host_waits += e.host_waits;
    mean.replayed += e.replayed;
    if (!e.why_not_captured.empty()) mean.why_not_captured = e.why_not_captured;
  }
  mean.divide_by_steps();
  if (loaded > 0) mean.load = {other_cpu / loaded, steal / loaded, mhz / loaded};
  if (gpu_timed > 0) {
    mean.load.gpu_mhz = gpu_mhz / gpu_timed;
    mean.load.gpu_max_mhz = gpu_max_mhz;
    mean.load.gpu_other_processes = gpu_others;
  }
  if (epochs.size() > first) {  // means of the epochs'
    mean.host_waits /= static_cast<double>(epochs.size() - first);
    mean.replayed /= static_cast<double>(epochs.size() - first);
  }
  return mean;
}

EpochTimes split_median_step(const RunTiming& run) {
  EpochTimes t = mean_epoch_times(run.epochs);
  if (!run.speed.known() || t.steps == 0 || t.step_seconds <= 0) return t;
  const double f = run.speed.median_seconds / t.step_seconds;
  t.step_seconds *= f, t.data_wait_seconds *= f;
  t.communication_seconds *= f, t.communication_wait_seconds *= f;
  for (double& s : t.op_seconds) s *= f;
  return t;
}

std::vector<TimeRow> time_rows(const RunTiming& run) { return compare_times(run, run).rows; }

TimeComparison compare_times(const RunTiming& baseline, const RunTiming& other) {
  TimeComparison c;
  c.means = {split_median_step(baseline), split_median_step(other)};
  c.speedup = speed_up(other.speed, baseline.speed);
  const EpochTimes& a = c.means[0];  // not a structured binding: clang 14 cannot capture one in the lambda
  const EpochTimes& b = c.means[1];
  auto row = [&](std::string label, double sa, double sb) {
    c.rows.push_back({std::move(label),
                      {1000 * sa, 1000 * sb},
                      {share(sa, a.step_seconds), share(sb, b.step_seconds)},
                      ratio(sa, sb)});
  };
  for (size_t i = 0; i < kTimeClassCount; ++i)
    row(label_of(static_cast<TimeClass>(i)), a.op_seconds[i], b.op_seconds[i]);
  row("data wait", a.data_wait_seconds, b.data_wait_seconds);
  if (a.communication_seconds > 0 || b.communication_seconds > 0)
    row("waiting for communication", a.communication_wait_seconds, b.communication_wait_seconds);
  row("other", a.other_seconds(), b.other_seconds());
  row("step", a.step_seconds, b.step_seconds);
  // Beside the step, not a part of it: the all-reduce on its own thread, hidden by backward but for the wait above.
  if (a.communication_seconds > 0 || b.communication_seconds > 0)
    row("communication (beside backward)", a.communication_seconds, b.communication_seconds);
  // Without a steady speed, a step's time would be the epochs' mean, warm-up included: no figure to set beside the
  // table's, which says "too few steps".
  c.steady = {baseline.speed.known(), other.speed.known()};
  c.available = a.steps > 0 && b.steps > 0 && c.steady[0] && c.steady[1];
  if (c.available) c.sentence = time_sentence(a, b, c.speedup);
  return c;
}

std::string TimeComparison::unavailable() const {
  if (available) return {};
  const auto which = [](bool baseline, bool run) {
    return baseline && run ? "both runs" : baseline ? "the baseline" : "the run";
  };
  if (means[0].steps == 0 || means[1].steps == 0)
    return std::string("not recorded for ") + which(means[0].steps == 0, means[1].steps == 0);
  return std::string("too few steps for a steady speed in ") + which(!steady[0], !steady[1]);
}

std::string time_sentence(const EpochTimes& a, const EpochTimes& b, const SpeedUp& end_to_end) {
  struct Named {
    const Group* group;
    double sa, sb;
  };
  std::vector<Named> named;
  for (const Group& g : groups()) {
    const double sa = group_seconds(a, g), sb = group_seconds(b, g);
    if (std::max(share(sa, a.step_seconds), share(sb, b.step_seconds)) >= kMentionShare) named.push_back({&g, sa, sb});
  }
  std::stable_sort(named.begin(), named.end(), [](const Named& x, const Named& y) { return x.sa > y.sa; });
  std::vector<std::string> parts;
  for (const Named& n : named) {
    const std::string name = n.group->name;
    if (n.sa <= 0)
      parts.push_back(name + " new (" + percent(share(n.sb, b.step_seconds)) + " of the step)");
    else if (n.sb <= 0)
      parts.push_back(name + " gone");
    else
      parts.push_back(name + " " + change_text(n.sa, n.sb));
  }
  if (std::max(share(a.data_wait_seconds, a.step_seconds), share(b.data_wait_seconds, b.step_seconds)) >= kMentionShare)
    parts.push_back("data wait " + percent(share(b.data_wait_seconds, b.step_seconds)) + " of the step");
  std::string s;
  for (const std::string& p : parts) s += (s.empty() ? "" : ", ") + p;
  SpeedUp whole = end_to_end;
  if (!whole.known())  // steps' ratio, with no interval to give
    whole = {ratio(a.step_seconds, b.step_seconds), 0, std::numeric_limits<double>::infinity()};
  const std::string end = "end to end " + speed_up_text(whole);
  return s.empty() ? end : s + ", so " + end;
}

}  // namespace ampwb
