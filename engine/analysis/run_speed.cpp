// Steady-state step times, their medians and quartiles, and the block bootstrap of the speed-up.
#include "analysis/run_speed.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>

#include "analysis/report_text.h"

namespace ampwb {
namespace {

constexpr size_t kBlocks = 20;       // blocks of consecutive steps a run's steps are cut into for the bootstrap
constexpr int kResamples = 2000;     // enough for stable 2.5% and 97.5% percentiles
// With fewer blocks (steady steps) in a run, the bootstrap's medians take so few values that its interval claims
// more than the steps can tell: no interval then, as for fewer than kIntervalRounds rounds in alternation.
constexpr size_t kIntervalBlocks = 8;
constexpr uint64_t kSeed = 0x5eed5;  // fixed: every view of one pair of runs shows the same interval

// The value at quantile q of `v` (linear between order statistics), which it reorders.
double quantile(std::vector<double>& v, double q) {
  std::sort(v.begin(), v.end());
  const double at = q * static_cast<double>(v.size() - 1);
  const size_t i = static_cast<size_t>(at);
  return i + 1 < v.size() ? v[i] + (at - static_cast<double>(i)) * (v[i + 1] - v[i]) : v[i];
}

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// The median of a resample of `from`: as many values, drawn with replacement.
double resampled_median(const std::vector<double>& from, uint64_t& state, std::vector<double>& scratch) {
  scratch.resize(from.size());
  for (double& x : scratch) x = from[splitmix64(state) % from.size()];
  return quantile(scratch, 0.5);
}

std::string text(const char* format, double a, double b = 0, double c = 0) {
  char buf[128];
  std::snprintf(buf, sizeof buf, format, a, b, c);
  return buf;
}

// Two decimals below 10, one above: "1.32", "12.5".
std::string ratio_number(double r) { return text(r < 9.995 ? "%.2f" : "%.1f", r); }

// A ratio or an interval's bound, with the decimals it takes not to read as 1 where it is not: an interval that
// leaves 1.0 out must not be printed as reaching it ("0.94-1.00" beside "slower"), nor its ratio as 1.00.
std::string bound_number(double r) {
  std::string out = ratio_number(r);
  if (r == 1 || std::strtod(out.c_str(), nullptr) != 1) return out;
  out = text("%.3f", r);
  if (std::strtod(out.c_str(), nullptr) != 1) return out;
  // Within a two-thousandth of 1: rounded away from it, to the side the number lies on.
  return text("%.4f", r < 1 ? std::floor(r * 1e4) / 1e4 : std::ceil(r * 1e4) / 1e4);
}

}  // namespace

RunSpeed measure_speed(const std::vector<StepReport>& steps, int64_t images_per_step, int64_t numerics_every) {
  RunSpeed speed;
  speed.images_per_step = static_cast<double>(images_per_step);
  std::vector<double> seconds;
  for (size_t i = 1; i + 1 < steps.size(); ++i) {
    const StepReport &before = steps[i - 1], &step = steps[i], &after = steps[i + 1];
    const bool first_of_epoch = before.epoch != step.epoch, last_of_epoch = after.epoch != step.epoch;
    const bool follows = before.step + 1 == step.step;  // a resumed run's steps may start anew
    const bool probed = numerics_every > 0 && (step.step + 1) % numerics_every == 0;  // as the trainer decides
    if (first_of_epoch || last_of_epoch || !follows || step.step < kWarmupSteps || probed) continue;
    const double dt = step.wall_seconds - before.wall_seconds;
    if (dt > 0 && std::isfinite(dt)) seconds.push_back(dt);
  }
  if (seconds.empty()) return speed;
  speed.steps = static_cast<int64_t>(seconds.size());
  const size_t blocks = std::min(kBlocks, seconds.size());
  for (size_t b = 0; b < blocks; ++b) {
    std::vector<double> block(seconds.begin() + static_cast<std::ptrdiff_t>(b * seconds.size() / blocks),
                              seconds.begin() + static_cast<std::ptrdiff_t>((b + 1) * seconds.size() / blocks));
    speed.block_median_seconds.push_back(quantile(block, 0.5));
  }
  speed.median_seconds = quantile(seconds, 0.5);
  speed.q1_seconds = quantile(seconds, 0.25);
  speed.q3_seconds = quantile(seconds, 0.75);
  return speed;
}

SpeedUp speed_up(const RunSpeed& run, const RunSpeed& baseline) {
  SpeedUp s;
  if (!run.known() || !baseline.known()) return s;
  s.ratio = run.images_per_second() / baseline.images_per_second();
  s.low = 0, s.high = std::numeric_limits<double>::infinity();
  if (run.block_median_seconds.size() < kIntervalBlocks || baseline.block_median_seconds.size() < kIntervalBlocks)
    return s;
  uint64_t state = kSeed;
  std::vector<double> ratios, scratch;
  ratios.reserve(kResamples);
  for (int r = 0; r < kResamples; ++r) {
    const double run_median = resampled_median(run.block_median_seconds, state, scratch);
    const double base_median = resampled_median(baseline.block_median_seconds, state, scratch);
    ratios.push_back((run.images_per_step / run_median) / (baseline.images_per_step / base_median));
  }
  s.low = std::min(s.ratio, quantile(ratios, 0.025));
  s.high = std::max(s.ratio, quantile(ratios, 0.975));
  return s;
}

SpeedUp speed_up_over_rounds(const std::vector<double>& run, const std::vector<double>& baseline) {
  std::vector<double> ratios;
  for (size_t r = 0; r < run.size() && r < baseline.size(); ++r)
    if (run[r] > 0 && baseline[r] > 0) ratios.push_back(run[r] / baseline[r]);
  SpeedUp s;
  if (ratios.empty()) return s;
  s.ratio = quantile(ratios, 0.5);
  s.low = 0, s.high = std::numeric_limits<double>::infinity();
  if (ratios.size() >= kIntervalRounds) s.low = ratios.front(), s.high = ratios.back();  // sorted by quantile()
  s.confidence = 1 - std::ldexp(1.0, 1 - static_cast<int>(ratios.size()));
  return s;
}

SpeedUp alternating_speed_up(const AlternatingSpeed& timed, int64_t run, int64_t baseline) {
  const auto at = [&](int64_t id) { return std::find(timed.runs.begin(), timed.runs.end(), id) - timed.runs.begin(); };
  const size_t r = static_cast<size_t>(at(run)), b = static_cast<size_t>(at(baseline));
  if (r >= timed.images_per_second.size() || b >= timed.images_per_second.size() ||
      timed.images_per_second[r] == timed.images_per_second[b])
    return {};
  return speed_up_over_rounds(timed.images_per_second[r], timed.images_per_second[b]);
}

namespace {
// The ratio, its interval and whether 1.0× lies inside it, in a sentence's words or a table cell's (whose row's note
// says what the brackets hold).
std::string speed_up_words(const SpeedUp& s, bool cell) {
  if (!s.known()) return "-";
  // The ratio keeps the decimals that tell it from 1 where its interval does.
  std::string out = (s.distinguishable() ? bound_number(s.ratio) : ratio_number(s.ratio)) + "\u00d7";
  if (std::isinf(s.high))  // steps, or rounds timed in alternation
    return out + (cell ? " (too few to tell)" : " (too few steps to tell it from 1.0\u00d7)");
  const std::string interval = bound_number(s.low) + "\u2013" + bound_number(s.high);
  out += cell ? " (" + interval + ")"
              : " (" + std::to_string(std::lround(100 * s.confidence)) + "% interval " + interval + ")";
  if (s.distinguishable()) return out;
  return out + (cell ? ", within noise" : ": not distinguishable from 1.0\u00d7");
}
}  // namespace

std::string speed_up_text(const SpeedUp& s) { return speed_up_words(s, false); }
std::string speed_up_cell(const SpeedUp& s) { return speed_up_words(s, true); }

std::string speed_up_within_noise_headline(const SpeedUp& s) {
  if (!s.known()) return "No speed-up measured";
  // An interval spanning more than a factor of two holds large speed-ups both ways: the measurement is what it says.
  const bool too_wide = std::isinf(s.high) || s.high > 2 * s.low;
  return (too_wide ? "Speed-up not measured closely enough to tell: "
                   : "No speed-up distinguishable from the noise: ") +
         ratio_number(s.ratio) + "\u00d7 (" +
         (std::isinf(s.high) ? std::string("too few steps to tell")
                             : "interval " + bound_number(s.low) + "\u2013" + bound_number(s.high)) +
         ")";
}

std::string speed_up_ratio_text(const SpeedUp& s) {
  if (!s.known()) return "-";
  const auto number = s.distinguishable() ? bound_number : ratio_number;
  return s.ratio >= 1 ? number(s.ratio) + "\u00d7" : number(1 / s.ratio) + "\u00d7 slower";
}

std::string speed_text(const RunSpeed& s) {
  if (!s.known()) return "-";
  return text("%.1f images/s (interquartile range %.1f\u2013%.1f, ", s.images_per_second(), s.images_per_second_q1(),
              s.images_per_second_q3()) +
         std::to_string(s.steps) + (s.steps == 1 ? " step)" : " steps)");
}

std::string speed_cell(const RunSpeed& s) {
  if (!s.known()) return "-";
  return text("%.1f images/s (IQR %.1f\u2013%.1f)", s.images_per_second(), s.images_per_second_q1(),
              s.images_per_second_q3());
}

std::string timing_warning(const std::vector<RunLoad>& runs) {
  std::vector<std::string> reasons;
  // The runs busy in one way, said once with the range of their shares: "51-54% busy ... during runs 10, 11 and 12".
  struct Busy {
    std::vector<int64_t> runs;
    double least = 1, most = 0;
    void add(int64_t run, double share) {
      runs.push_back(run);
      least = std::min(least, share), most = std::max(most, share);
    }
    std::string percent() const {
      return std::lround(100 * least) == std::lround(100 * most) ? text("%.0f%%", 100 * most)
                                                                 : text("%.0f-%.0f%%", 100 * least, 100 * most);
    }
  } other_work, other_guests;
  double least = 1, most = 0;
  const RunLoad *quietest = nullptr, *busiest = nullptr;
  for (const RunLoad& r : runs) {
    if (r.load.gpu_other_processes > 0)
      reasons.push_back(std::to_string(r.load.gpu_other_processes) +
                        (r.load.gpu_other_processes > 1 ? " other processes" : " other process") +
                        " used the GPU during run " + std::to_string(r.run));
    if (!r.load.known()) continue;
    if (r.load.other_cpu >= kBusyMachine) other_work.add(r.run, r.load.other_cpu);
    if (r.load.steal >= kBusyMachine) other_guests.add(r.run, r.load.steal);
    if (!quietest || r.load.other_cpu < least) least = r.load.other_cpu, quietest = &r;
    if (!busiest || r.load.other_cpu > most) most = r.load.other_cpu, busiest = &r;
  }
  if (!other_work.runs.empty())
    reasons.push_back("the machine was " + other_work.percent() + " busy with other work during " +
                      runs_phrase(other_work.runs));
  if (!other_guests.runs.empty())
    reasons.push_back("the hypervisor took " + other_guests.percent() + " of the CPUs for other guests during " +
                      runs_phrase(other_guests.runs));
  if (reasons.empty() && busiest && most - least >= kLoadDifference)
    reasons.push_back(
        text("the runs were measured under different loads (%.0f%% of the CPUs busy with other work", 100 * most) +
        " during run " + std::to_string(busiest->run) + text(", %.0f%%", 100 * least) + " during run " +
        std::to_string(quietest->run) + ")");
  if (reasons.empty()) return {};
  std::string out = "timings unreliable: ";
  for (size_t i = 0; i < reasons.size(); ++i) out += (i ? "; " : "") + reasons[i];
  return out;
}

std::string alternation_warning(const AlternatingSpeed& timed) {
  const std::string reasons = busy_reasons(timed.load);
  return reasons.empty() ? std::string() : "timed in alternation while " + reasons;
}

std::string work_difference(const RunRecord& run, const RunRecord& baseline) {
  std::string work, place;
  // One aspect, as `describe` words it for each run; left out where either record does not say.
  auto compare = [&](std::string& into, const std::function<std::string(const RunRecord&)>& describe) {
    const std::string a = describe(run), b = describe(baseline);
    if (!a.empty() && !b.empty() && a != b) into += (into.empty() ? "" : "; ") + a + " against " + b;
  };
  compare(work, [](const RunRecord& r) { return r.depth ? "ResNet-" + std::to_string(r.depth) : ""; });
  if (run.depth == baseline.depth)  // the same depth with another stem or number of classes
    compare(work, [](const RunRecord& r) {
      const std::string& s = r.info.model_summary;  // "ResNet-20 (small stem, 10 classes), 0.272 M parameters"
      const size_t end = s.find("), ");
      return end != std::string::npos ? s.substr(0, end + 1) : "";
    });
  compare(work, [](const RunRecord& r) { return r.image_size ? std::to_string(r.image_size) + " px images" : ""; });
  compare(work, [](const RunRecord& r) { return r.batch_size ? "batch " + std::to_string(r.batch_size) : ""; });
  compare(work, [](const RunRecord& r) {
    return std::to_string(r.info.world_size) + (r.info.world_size > 1 ? " processes" : " process");
  });
  // Where: the device by its kind and, for a GPU, its name ("cuda:0 (NVIDIA H200, ..."), not its index.
  compare(place, [](const RunRecord& r) {
    if (r.device.kind != DeviceChoice::Kind::Cuda) return std::string("the CPU");
    const size_t open = r.backend.find(" ("), end = r.backend.find_first_of(",)", open + 2);
    return open == std::string::npos || end == std::string::npos ? std::string("a GPU")
                                                                 : r.backend.substr(open + 2, end - open - 2);
  });
  compare(place, [](const RunRecord& r) {  // the CPU backend's threads, as its description gives them: "..., 2 threads"
    const size_t at = r.backend.find(" thread");
    size_t digits = at;
    while (digits != std::string::npos && digits > 0 && std::isdigit(static_cast<unsigned char>(r.backend[digits - 1])))
      --digits;
    return digits != at ? r.backend.substr(digits, r.backend.find_first_of(",)", at) - digits) : "";
  });
  compare(place, [](const RunRecord& r) { return r.host.empty() ? "" : "host " + r.host; });
  std::string out = work.empty() ? "" : "other work (" + work + ")";
  if (!place.empty()) out += (out.empty() ? "" : ", ") + std::string("elsewhere (") + place + ")";
  return out;
}

}  // namespace ampwb
