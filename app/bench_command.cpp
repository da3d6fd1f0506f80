// ampwb bench: training throughput on synthetic data.
#include <cstdio>

#include "commands.h"
#include "train/benchmark.h"

namespace ampwb::cli {

int bench_command(Args& args) {
  BenchConfig c;
  c.depth = args.integer("depth", c.depth);
  c.image_size = args.integer("image-size", c.image_size);
  c.batch_size = args.integer("batch-size", c.batch_size);
  c.num_classes = args.integer("classes", c.num_classes);
  c.precision = parse_precision_mode(args.text("precision", mode_name(c.precision)));
  c.steps = args.integer("steps", c.steps);
  c.warmup = args.integer("warmup", c.warmup);
  c.device = args.text("device", c.device);
  c.threads = args.integer("threads", c.threads);
  c.seed = static_cast<uint64_t>(args.integer64("seed", 0));
  const bool json = args.flag("json");
  args.reject_unknown();

  const BenchResult r = run_benchmark(c);
  if (json) {
    std::printf(
        "{\"framework\": \"ampwb\", \"version\": %s, \"device\": %s, \"model\": %s, \"depth\": %d, "
        "\"image_size\": %d, \"batch_size\": %d, \"precision\": %s, \"steps\": %d, \"step_ms_median\": %.4f, "
        "\"images_per_second\": %.4f, \"peak_bytes\": %zu, \"max_rss_bytes\": %zu, \"compute\": %s}\n",
        json_string(AMPWB_VERSION).c_str(), json_string(r.backend_description).c_str(),
        json_string(r.model_summary).c_str(), c.depth, c.image_size, c.batch_size,
        json_string(mode_name(c.precision)).c_str(), c.steps, r.step_ms_median, r.images_per_second, r.peak_bytes,
        r.max_rss_bytes, json_string(r.compute).c_str());
  } else {
    std::printf(
        "%s on %s\n%s, batch %d, %d px: median step %.1f ms, %.1f images/s, peak tensors %.1f MiB, max RSS "
        "%.1f MiB\n",
        r.model_summary.c_str(), r.backend_description.c_str(), mode_name(c.precision), c.batch_size, c.image_size,
        r.step_ms_median, r.images_per_second, r.peak_bytes / 1048576.0, r.max_rss_bytes / 1048576.0);
    if (!r.compute.empty()) std::printf("compute: %s\n", r.compute.c_str());
    for (const std::string& note : r.notes) std::printf("note:    %s\n", note.c_str());
  }
  return 0;
}

}  // namespace ampwb::cli
