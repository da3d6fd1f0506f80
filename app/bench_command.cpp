// ampwb bench: training throughput on synthetic data. --json prints one line (the bench/ drivers read the last JSON
// line of the output).
#include <cstdio>

#include "commands.h"
#include "setting_flags.h"
#include "train/benchmark.h"
#include "train_flags.h"

namespace ampwb::cli {
namespace {

struct BenchOptions {
  BenchConfig config;
  std::string precision = mode_name(config.precision);  // --precision, checked against the modes' names
  bool json = false;
};

// The profile per timed step, in ms, by class; "other" is the rest of the step's wall time (BenchResult::profile).
nlohmann::ordered_json profile_json(const BenchResult& r, int steps) {
  nlohmann::ordered_json j;
  for (size_t i = 0; i < r.profile.seconds.size(); ++i)
    j[time_class_name(static_cast<TimeClass>(i))] = r.profile.seconds[i] * 1000.0 / steps;
  j["other"] = (r.profiled_seconds - r.profile.total_seconds()) * 1000.0 / steps;
  return j;
}

void print_profile(const BenchResult& r, int steps) {
  const double step_ms = r.profiled_seconds * 1000.0 / steps;
  std::printf("\nwhere the mean step's %.1f ms go (%s):\n", step_ms,
              r.profile_device_timed
                  ? "each op timed between device events, the step running at full speed; other: the device idle "
                    "between ops"
                  : "each op timed on the host clock; other: the host's own work between ops");
  const nlohmann::ordered_json profile = profile_json(r, steps);  // items() refers into it
  for (const auto& [name, ms] : profile.items()) {
    const double value = ms.get<double>();
    std::printf("  %-22s %9.2f ms  %5.1f%%\n", name.c_str(), value, step_ms > 0 ? 100.0 * value / step_ms : 0.0);
  }
}

int bench_command(const BenchOptions& options) {
  BenchConfig c = options.config;
  c.precision = parse_precision_mode(options.precision);
  const BenchResult r = run_benchmark(c);
  if (options.json) {
    nlohmann::ordered_json out = {{"framework", "ampwb"},
                                  {"version", AMPWB_VERSION},
                                  {"device", r.backend_description},
                                  {"model", r.model_summary},
                                  {"depth", c.depth},
                                  {"image_size", c.image_size},
                                  {"batch_size", c.batch_size},
                                  {"precision", mode_name(c.precision)},
                                  {"steps", c.steps},
                                  {"step_ms_median", r.step_ms_median},
                                  {"step_ms_q1", r.step_ms_q1},
                                  {"step_ms_q3", r.step_ms_q3},
                                  {"images_per_second", r.images_per_second},
                                  {"warmup_seconds", r.warmup_seconds},
                                  {"peak_bytes", r.peak_bytes},
                                  {"max_rss_bytes", r.max_rss_bytes},
                                  {"memory", r.memory},
                                  {"host_sync", choice_name(r.deferred ? HostSync::Deferred : HostSync::EveryStep)},
                                  {"host_waits_per_step", r.host_waits_per_step},
                                  {"cuda_graphs", choice_name(r.captured ? CudaGraphs::On : CudaGraphs::Off)},
                                  {"replayed_steps", r.replayed_steps},
                                  {"why_not_captured", r.why_not_captured},
                                  {"compute", r.compute}};
    fields(r.load, [&](Field f, const auto& value) { out["load"][f.key] = value; });
    if (c.profile) out["profile_ms_per_step"] = profile_json(r, c.steps);
    print_json(out, true);
  } else {
    std::printf(
        "%s on %s\n%s, batch %d, %d px: median step %.1f ms (interquartile range %.1f\u2013%.1f over %d step%s), "
        "%.1f images/s, peak tensors %.1f MiB, max RSS %.1f MiB\n",
        r.model_summary.c_str(), r.backend_description.c_str(), mode_name(c.precision), c.batch_size, c.image_size,
        r.step_ms_median, r.step_ms_q1, r.step_ms_q3, c.steps, c.steps == 1 ? "" : "s", r.images_per_second,
        r.peak_bytes / 1048576.0, r.max_rss_bytes / 1048576.0);
    std::printf("load:    %s\n", machine_load_text(r.load).c_str());
    // Two benchmarks run one after the other meet different loads: their ratio is the load's as much.
    if (too_busy_to_time(r.load))
      std::printf(
          "\u26a0 timings unreliable: other work shared the machine while the steps were timed (above): time them "
          "again on a quiet machine; to compare precision modes, a sweep run here times them in alternation, which "
          "evens out the machine's drift between invocations\n");
    std::printf("warm-up: %.1f s from building the model to the end of %d untimed step%s\n", r.warmup_seconds, c.warmup,
                c.warmup == 1 ? "" : "s");
    if (!r.compute.empty()) std::printf("compute: %s\n", r.compute.c_str());
    std::printf("memory:  %s\n", r.memory.c_str());
    std::printf("host waits per step: %.2f (%s)\n", r.host_waits_per_step,
                r.deferred ? "deferred: numbers read one step late" : "every step reads its numbers");
    if (r.captured)
      std::printf("captured steps: %lld of %d timed steps replayed%s%s\n", static_cast<long long>(r.replayed_steps),
                  c.steps, r.why_not_captured.empty() ? "" : "; op by op because ", r.why_not_captured.c_str());
    for (const std::string& note : r.notes) std::printf("note:    %s\n", note.c_str());
    if (c.profile) print_profile(r, c.steps);
  }
  return 0;
}

}  // namespace

void add_bench_command(CLI::App& app, Invocation& invocation) {
  auto options = std::make_shared<BenchOptions>();
  BenchConfig& c = options->config;
  CLI::App* bench = app.add_subcommand("bench", "time training steps of a ResNet on synthetic data");
  names_setting(
      add_number(bench, "--depth", c.depth, "ResNet depth: 18 34 50 101 152, or the CIFAR family 20 32 44 56 110"),
      "depth");
  names_setting(add_number(bench, "--image-size", c.image_size, "image side, px"), "image_size");
  names_setting(add_number(bench, "--batch-size", c.batch_size, "images per step"), "batch_size");
  names_setting(add_number(bench, "--classes", c.num_classes, "classes of the model's output"), "num_classes");
  names_setting(add_precision_mode(bench, options->precision), "precision");
  names_setting(add_number(bench, "--steps", c.steps, "timed steps (the median is reported)"), "steps");
  names_setting(add_number(bench, "--warmup", c.warmup, "untimed steps first"), "warmup");
  add_named_value(bench, "--device", c.device, "cpu, cuda, cuda:N or auto");
  names_setting(add_number(bench, "--threads", c.threads, "CPU threads (0: every core)"), "threads");
  names_setting(add_number(bench, "--seed", c.seed, "seeds the weights and the synthetic data"), "seed");
  bench->add_flag("--json", options->json, "one line of JSON (NaN and infinity as null)");
  names_setting(bench->add_flag("--profile", c.profile, "time every op by class and print where a step's time goes"),
                "profile");
  names_setting(add_choice(bench, "--host-sync", c.host_sync, "when a step waits for its device"), "host_sync");
  names_setting(add_choice(bench, "--cuda-graphs", c.cuda_graphs, "deferred steps as CUDA graphs (not with --profile)"),
                "cuda_graphs");
  names_setting(add_choice(bench, "--conv-algorithm", c.conv_algorithm, "CPU convolutions"), "conv_algorithm");
  names_setting(bench->add_flag("--deterministic", c.deterministic, "GPU: deterministic convolutions only"),
                "deterministic");
  bench->footer(devices_help);
  run_on_parse(bench, invocation, options, bench_command);
}

}  // namespace ampwb::cli
