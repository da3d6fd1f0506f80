// ampwb dataset: inspect a dataset folder (the report, as text or JSON), name the built-in sample, and time the
// data pipeline (decoding per core, and the loader against a simulated training step).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "commands.h"
#include "core/error.h"
#include "data/data_benchmark.h"
#include "data/dataset.h"
#include "data/loader.h"

namespace ampwb::cli {
namespace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

DatasetOptions dataset_options(Args& args) {
  DatasetOptions o;
  o.validation_fraction = args.number("validation-fraction", o.validation_fraction);
  o.seed = static_cast<uint64_t>(args.integer64("seed", 0));
  if (args.flag("no-cache")) o.cache_dir = "-";
  return o;
}

std::string positional(Args& args, size_t i, const char* what) {
  if (args.positional().size() <= i) throw Error(std::string("missing ") + what + " (see ampwb help)");
  return args.positional()[i];
}

int inspect(Args& args) {
  const std::string dir = positional(args, 1, "DIR: ampwb dataset inspect DIR [--json]");
  const DatasetOptions options = dataset_options(args);
  const bool json = args.flag("json");
  args.reject_unknown();
  const Dataset ds = Dataset::inspect(dir, options);
  const DatasetReport& r = ds.report();
  if (json) {
    std::printf("%s\n", r.to_json().dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::printf("%s", r.to_text().c_str());
  }
  if (!r.trainable()) {
    std::string message;
    for (size_t i = 0; i < r.errors.size(); ++i) message += (i ? "; " : "") + r.errors[i];
    std::fprintf(stderr, "ampwb dataset: cannot train on '%s': %s\n", dir.c_str(), message.c_str());
    return 1;
  }
  return 0;
}

// --- bench-decode: decoding per core on generated images -----------------------------------------------------------

int bench_decode(Args& args) {
  const int count = args.integer("count", 1000);
  const int repeats = args.integer("repeat", 3);
  const std::string dir_flag = args.text("dir", "");
  const bool json = args.flag("json");
  args.reject_unknown();
  const bool temporary = dir_flag.empty();
  const fs::path dir =
      temporary ? fs::temp_directory_path() / ("ampwb-bench-decode-" + std::to_string(::getpid())) : fs::path(dir_flag);
  write_benchmark_images(dir.string(), count);
  const std::vector<DecodeTiming> timings = time_decoding(dir.string(), repeats);
  if (temporary) fs::remove_all(dir);

  if (json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& t : timings)
      j.push_back({{"kind", t.kind},
                   {"step", t.step},
                   {"images", t.images},
                   {"seconds", t.seconds},
                   {"images_per_second", t.images_per_second()}});
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("%-8s %-52s %7s %9s %10s\n", "images", "step (one core unless said)", "count", "seconds", "images/s");
    for (const auto& t : timings)
      std::printf("%-8s %-52s %7d %9.3f %10.0f\n", t.kind.c_str(), t.step.c_str(), t.images, t.seconds,
                  t.images_per_second());
  }
  return 0;
}

// --- bench-loader: epochs of the loader against a simulated training step ----------------------------------------

int bench_loader(Args& args) {
  const std::string dir = positional(args, 1, "DIR: ampwb dataset bench-loader DIR");
  const DatasetOptions dopt = dataset_options(args);
  LoaderOptions o;
  o.image_size = args.integer("image-size", 64);
  o.batch_size = args.integer("batch-size", 64);
  o.threads = args.integer("threads", 2);
  o.augment = args.flag("augment");
  o.crop = args.text("crop", o.crop);
  o.normalization = args.text("normalization", o.normalization);
  o.cache_budget_bytes = static_cast<size_t>(args.integer64("cache-mb", 2048)) << 20;
  o.seed = static_cast<uint64_t>(args.integer64("seed", 0));
  const bool validation = args.text("split", "train") == "validation";
  const int epochs = args.integer("epochs", 3);
  const double compute_ms = args.number("compute-ms", 0);
  const bool json = args.flag("json");
  args.reject_unknown();

  const auto t_open = Clock::now();
  const Dataset ds = Dataset::open(dir, dopt);
  const double open_seconds = seconds_since(t_open);
  const auto t_loader = Clock::now();
  DataLoader loader(ds, validation ? Split::Validation : Split::Train, o);
  const double loader_seconds = seconds_since(t_loader);
  nlohmann::json out = {{"dataset", dir},
                        {"images", loader.size()},
                        {"image_size", loader.image_size()},
                        {"batch_size", o.batch_size},
                        {"threads", o.threads},
                        {"compute_ms", compute_ms},
                        {"open_seconds", open_seconds},
                        {"loader_setup_seconds", loader_seconds},
                        {"epochs", nlohmann::json::array()}};
  if (!json)
    std::printf(
        "%s: %lld images, %d px, batch %d, %d loader threads, simulated step %.1f ms\n"
        "open %.2f s, loader setup (statistics) %.2f s\n"
        "epoch  seconds  wait_s  wait%%  images/s  decoded  cache_hits  cache_MiB  rss_MiB  peak_MiB\n",
        dir.c_str(), static_cast<long long>(loader.size()), loader.image_size(), o.batch_size, o.threads, compute_ms,
        open_seconds, loader_seconds);
  for (int e = 0; e < epochs; ++e) {
    const LoaderStats before = loader.stats();
    const auto t0 = Clock::now();
    loader.start_epoch(e);
    int64_t images = 0;
    for (Batch b; loader.next(b);) {
      images += b.labels.numel();
      simulated_compute(compute_ms);
    }
    const double seconds = seconds_since(t0);
    const LoaderStats st = loader.stats();
    const double rss = resident_bytes() / 1048576.0, peak = peak_resident_bytes() / 1048576.0;
    out["epochs"].push_back({{"epoch", e},
                             {"seconds", seconds},
                             {"wait_seconds", st.wait_seconds},
                             {"wait_fraction", st.wait_seconds / seconds},
                             {"images_per_second", images / seconds},
                             {"decoded", st.decoded - before.decoded},
                             {"cache_hits", st.cache_hits - before.cache_hits},
                             {"cache_bytes", st.cache_bytes},
                             {"rss_mib", rss},
                             {"peak_rss_mib", peak}});
    if (!json)
      std::printf("%5d %8.2f %7.2f %5.1f%% %9.0f %8lld %11lld %10.1f %8.1f %9.1f\n", e, seconds, st.wait_seconds,
                  100 * st.wait_seconds / seconds, images / seconds,
                  static_cast<long long>(st.decoded - before.decoded),
                  static_cast<long long>(st.cache_hits - before.cache_hits), st.cache_bytes / 1048576.0, rss, peak);
  }
  if (json) std::printf("%s\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  return 0;
}

}  // namespace

int dataset_command(Args& args) {
  const std::string sub = args.positional().empty() ? "" : args.positional()[0];
  if (sub == "inspect") return inspect(args);
  if (sub == "sample") {
    args.reject_unknown();
    std::printf("%s\n", builtin_sample_dataset().c_str());
    return 0;
  }
  if (sub == "bench-decode") return bench_decode(args);
  if (sub == "bench-loader") return bench_loader(args);
  throw Error("ampwb dataset needs inspect DIR [--json], sample, bench-decode or bench-loader DIR (got '" + sub + "')");
}

}  // namespace ampwb::cli
