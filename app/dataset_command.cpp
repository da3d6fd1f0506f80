// ampwb dataset: inspect a dataset folder (the report, as text or JSON), name the built-in sample, and time the
// data pipeline (decoding per core, and the loader against a simulated training step).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
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
#include "store/dataset_fingerprint.h"

namespace ampwb::cli {
namespace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The options of inspect and bench-loader that decide what Dataset::open sees.
struct DatasetFlags {
  DatasetOptions options;
  bool no_cache = false;

  DatasetOptions resolve() const {
    DatasetOptions o = options;
    if (no_cache) o.cache_dir = "-";
    return o;
  }
};

void add_dataset_flags(CLI::App* command, DatasetFlags& flags) {
  // ampwb train's spelling first; the long one is kept for the scripts that use it.
  add_number(command, "--val-fraction,--validation-fraction", flags.options.validation_fraction,
             "the share held out for validation when the data has no split of its own")
      ->check(CLI::Validator(
          [](const std::string& text) {
            const double share = std::strtod(text.c_str(), nullptr);
            return share >= 0 && share < 1 ? std::string() : "must be in [0, 1), got " + text;
          },
          ""));
  add_number(command, "--seed", flags.options.seed, "seeds the split (and bench-loader's order and augmentation)");
  command->add_flag("--no-cache", flags.no_cache, "neither read nor write the scan cache");
}

struct InspectOptions {
  std::string dir;
  DatasetFlags dataset;
  bool json = false;
};

// Whether the two descriptors write to one place: one terminal, or one file or pipe (2>&1).
bool same_destination(int a, int b) {
  struct stat sa {
  }, sb{};
  if (::fstat(a, &sa) != 0 || ::fstat(b, &sb) != 0) return false;
  if (::isatty(a) && ::isatty(b)) return true;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

int inspect(const InspectOptions& options) {
  const std::string& dir = options.dir;
  const Dataset ds = Dataset::inspect(dir, options.dataset.resolve());
  DatasetReport r = ds.report();
  // The fingerprint runs on this folder record (ampwb show, compare), not the scan cache's key.
  r.fingerprint = dataset_fingerprint(r.root);
  if (options.json) {
    print_json(r.to_json());
  } else {
    std::printf("%s", r.to_text().c_str());
  }
  if (!r.trainable()) {
    // A report read on the terminal, or in the file both outputs go to, ends with its "error:" lines already;
    // elsewhere stderr is what a reader sees.
    std::string message = " (the error lines above say why)";
    if (options.json || !same_destination(STDOUT_FILENO, STDERR_FILENO)) {
      message = ":";
      for (size_t i = 0; i < r.errors.size(); ++i) message += (i ? "; " : " ") + r.errors[i];
    }
    std::fflush(stdout);  // the report first, where both go to one file
    std::fprintf(stderr, "ampwb dataset inspect: '%s' cannot be trained on%s\n", dir.c_str(), message.c_str());
    return 1;
  }
  return 0;
}

struct SampleOptions {};

int sample(const SampleOptions&) {
  std::printf("%s\n", builtin_sample_dataset().c_str());
  return 0;
}

// --- bench-decode: decoding per core on generated images -----------------------------------------------------------

struct BenchDecodeOptions {
  int count = 1000, repeats = 3;
  std::string dir;
  bool json = false;
};

int bench_decode(const BenchDecodeOptions& options) {
  const std::string& dir_flag = options.dir;
  const bool json = options.json;
  const bool temporary = dir_flag.empty();
  const fs::path dir =
      temporary ? fs::temp_directory_path() / ("ampwb-bench-decode-" + std::to_string(::getpid())) : fs::path(dir_flag);
  std::error_code ec;
  if (!temporary && fs::exists(dir, ec) && !(fs::is_directory(dir, ec) && fs::is_empty(dir, ec)))
    throw Error("--dir '" + dir_flag + "' is not a new or empty folder: the generated images would mix with what is " +
                "there (a dataset, say)");
  write_benchmark_images(dir.string(), options.count);
  const std::vector<DecodeTiming> timings = time_decoding(dir.string(), options.repeats);
  if (temporary) fs::remove_all(dir);

  if (json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& t : timings)
      j.push_back({{"kind", t.kind},
                   {"step", t.step},
                   {"images", t.images},
                   {"seconds", t.seconds},
                   {"images_per_second", t.images_per_second()}});
    print_json(j);
  } else {
    std::printf("%-8s %-52s %7s %9s %10s\n", "images", "step (one core unless said)", "count", "seconds", "images/s");
    for (const auto& t : timings)
      std::printf("%-8s %-52s %7d %9.3f %10.0f\n", t.kind.c_str(), t.step.c_str(), t.images, t.seconds,
                  t.images_per_second());
  }
  return 0;
}

// --- bench-loader: epochs of the loader against a simulated training step ----------------------------------------

struct BenchLoaderOptions {
  std::string dir, split = "train";
  DatasetFlags dataset;
  LoaderOptions loader;
  int64_t cache_mb = 2048;
  int epochs = 3;
  double compute_ms = 0;
  bool json = false;

  BenchLoaderOptions() {
    loader.image_size = 64;
    loader.batch_size = 64;
    loader.threads = 2;
  }
};

int bench_loader(const BenchLoaderOptions& options) {
  const std::string& dir = options.dir;
  const DatasetOptions dopt = options.dataset.resolve();
  LoaderOptions o = options.loader;
  o.cache_budget_bytes = static_cast<size_t>(options.cache_mb) << 20;
  o.seed = dopt.seed;
  const bool validation = options.split == "validation";
  const int epochs = options.epochs;
  const double compute_ms = options.compute_ms;
  const bool json = options.json;

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
  if (json) print_json(out);
  return 0;
}

}  // namespace

void add_dataset_commands(CLI::App& app, Invocation& invocation) {
  CLI::App* dataset = app.add_subcommand("dataset", "check a dataset folder, name the built-in sample, time the data");
  dataset->require_subcommand(1);

  auto inspect_options = std::make_shared<InspectOptions>();
  CLI::App* inspect_cmd =
      dataset->add_subcommand("inspect", "what the loader finds in DIR: classes, counts, skipped files and why");
  inspect_cmd->add_option("DIR", inspect_options->dir, "the dataset folder")->type_name("")->required();
  add_dataset_flags(inspect_cmd, inspect_options->dataset);
  inspect_cmd->add_flag("--json", inspect_options->json, "the report as JSON");
  run_on_parse(inspect_cmd, invocation, inspect_options, inspect);

  CLI::App* sample_cmd = dataset->add_subcommand("sample", "the path of the built-in sample (Fashion-MNIST)");
  run_on_parse(sample_cmd, invocation, std::make_shared<SampleOptions>(), sample);

  auto decode = std::make_shared<BenchDecodeOptions>();
  CLI::App* bench_decode_cmd =
      dataset->add_subcommand("bench-decode", "time image decoding per core on generated images");
  add_number(bench_decode_cmd, "--count", decode->count, "images to generate")
      ->check(CLI::Range(1, 1000000).description(""));
  add_number(bench_decode_cmd, "--repeat", decode->repeats, "timed passes")->check(CLI::Range(1, 1000).description(""));
  bench_decode_cmd
      ->add_option("--dir", decode->dir, "write the images into this new or empty folder (default: a temporary one)")
      ->type_name("DIR");
  bench_decode_cmd->add_flag("--json", decode->json, "as JSON");
  run_on_parse(bench_decode_cmd, invocation, decode, bench_decode);

  auto loader = std::make_shared<BenchLoaderOptions>();
  CLI::App* bench_loader_cmd =
      dataset->add_subcommand("bench-loader", "time epochs of the loader on DIR against a simulated training step");
  bench_loader_cmd->add_option("DIR", loader->dir, "the dataset folder")->type_name("")->required();
  add_dataset_flags(bench_loader_cmd, loader->dataset);
  add_number(bench_loader_cmd, "--image-size", loader->loader.image_size, "image side, px")
      ->check(CLI::Range(8, 1024).description(""));
  add_number(bench_loader_cmd, "--batch-size", loader->loader.batch_size, "images per batch")
      ->check(CLI::Range(1, 1 << 20).description(""));
  add_number(bench_loader_cmd, "--threads", loader->loader.threads, "loader threads")
      ->check(CLI::Range(1, kMaxLoaderThreads).description(""));
  bench_loader_cmd->add_flag("--augment", loader->loader.augment, "random crop and horizontal flip");
  bench_loader_cmd->add_option("--crop", loader->loader.crop, "with --augment: how training images are cut")
      ->check(CLI::IsMember({"auto", "random-resized", "pad"}));
  bench_loader_cmd->add_option("--normalization", loader->loader.normalization, "per-channel statistics")
      ->check(CLI::IsMember({"dataset", "imagenet", "none"}));
  add_number(bench_loader_cmd, "--cache-mb", loader->cache_mb, "memory for decoded images, in MiB")
      ->check(CLI::NonNegativeNumber.description(""));
  bench_loader_cmd->add_option("--split", loader->split, "which split to load")
      ->check(CLI::IsMember({"train", "validation"}));
  add_number(bench_loader_cmd, "--epochs", loader->epochs, "epochs to time")
      ->check(CLI::Range(1, 10000).description(""));
  add_number(bench_loader_cmd, "--compute-ms", loader->compute_ms, "the simulated training step, ms")
      ->check(CLI::NonNegativeNumber.description(""));
  bench_loader_cmd->add_flag("--json", loader->json, "as JSON");
  run_on_parse(bench_loader_cmd, invocation, loader, bench_loader);
}

}  // namespace ampwb::cli
