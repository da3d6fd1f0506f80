// The run store's reading commands: runs, show, compare. Human tables by default, --json for scripts; every command
// takes --db. (Exports, edits and the store's own care are in store_commands.cpp.)
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "store/run_store.h"

namespace ampwb::cli {
namespace {
using nlohmann::json;

// --- formatting ---

std::string format(const char* fmt, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, value);
  return buf;
}

std::string percent(double fraction) { return std::isfinite(fraction) ? format("%.2f%%", 100 * fraction) : "-"; }

std::string duration(double seconds) {
  if (!(seconds > 0)) return "-";
  if (seconds < 60) return format("%.1f s", seconds);
  const long s = std::lround(seconds);
  char buf[32];
  if (s < 3600)
    std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
  return buf;
}

std::string mebibytes(size_t bytes) { return bytes ? format("%.1f MiB", bytes / 1048576.0) : "-"; }

std::string timestamp(const std::string& iso) {  // "2026-11-21T17:16:10Z" -> "2026-11-21 17:16"
  return iso.size() >= 16 ? iso.substr(0, 10) + " " + iso.substr(11, 5) : iso;
}

// Display width of UTF-8 text: code points, which is right for the Latin, Greek and Cyrillic names people type.
size_t width(const std::string& s) {
  return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

// A plain text table: columns padded to their widest cell, numbers right-aligned.
class Table {
 public:
  explicit Table(std::vector<std::string> header, std::vector<bool> right = {})
      : rows_{std::move(header)}, right_(std::move(right)) {}
  // Control characters shown as escapes: a name stored before they were refused cannot break the table.
  void add(std::vector<std::string> row) {
    for (std::string& cell : row) cell = printable(cell);
    rows_.push_back(std::move(row));
  }
  void print(const char* indent = "") const {
    std::vector<size_t> w;
    for (const auto& row : rows_)
      for (size_t i = 0; i < row.size(); ++i) {
        if (w.size() <= i) w.push_back(0);
        w[i] = std::max(w[i], width(row[i]));
      }
    for (const auto& row : rows_) {
      std::string line = indent;
      for (size_t i = 0; i < row.size(); ++i) {
        const std::string pad(w[i] - width(row[i]), ' ');
        const bool right = i < right_.size() && right_[i];
        line += right ? pad + row[i] : row[i] + (i + 1 < row.size() ? pad : "");
        if (i + 1 < row.size()) line += "  ";
      }
      std::printf("%s\n", line.c_str());
    }
  }

 private:
  std::vector<std::vector<std::string>> rows_;
  std::vector<bool> right_;
};

// --- JSON forms ---

json parse_or_null(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  return j.is_discarded() ? json() : j;
}

json summary_json(const RunSummary& s) {
  return {{"epochs_completed", s.epochs_completed},
          {"best_validation_accuracy", s.best_validation_accuracy},
          {"best_epoch", s.best_epoch},
          {"final_validation_accuracy", s.final_validation_accuracy},
          {"final_validation_loss", s.final_validation_loss},
          {"final_train_loss", s.final_train_loss},
          {"total_seconds", s.total_seconds},
          {"mean_epoch_seconds", s.mean_epoch_seconds},
          {"mean_images_per_second", s.mean_images_per_second},
          {"skipped_steps", s.skipped_steps},
          {"final_loss_scale", s.final_loss_scale},
          {"peak_bytes", s.peak_bytes}};
}

json run_json(const RunRecord& r) {
  return {{"id", r.id},
          {"name", r.name},
          {"created", r.created},
          {"updated", r.updated},
          {"ended", r.ended},
          {"status", run_status_name(r.status)},
          {"end_reason", r.end_reason},
          {"depth", r.depth},
          {"precision", r.precision},
          {"batch_size", r.batch_size},
          {"lr", r.lr},
          {"optimizer", r.optimizer},
          {"epochs", r.epochs},
          {"image_size", r.image_size},
          {"seed", r.seed},
          {"dataset_path", r.dataset_path},
          {"dataset_fingerprint", r.dataset_fingerprint},
          {"device", r.device},
          {"backend", r.backend},
          {"ampwb_version", r.ampwb_version},
          {"versions", r.versions},
          {"host", r.host},
          {"pid", r.pid},
          {"duration_seconds", r.duration_seconds},
          {"notes", r.notes},
          {"tags", r.tags}};
}

json epoch_json(const EpochReport& e) {
  return {{"epoch", e.epoch},
          {"train_loss", e.train_loss},
          {"train_accuracy", e.train_accuracy},
          {"validation_loss", e.validation_loss},
          {"validation_accuracy", e.validation_accuracy},
          {"validation_topk", e.validation_topk},
          {"topk", e.topk},
          {"seconds", e.seconds},
          {"images_per_second", e.images_per_second},
          {"data_wait_seconds", e.data_wait_seconds},
          {"compute_seconds", e.compute_seconds},
          {"skipped_steps", e.skipped_steps},
          {"loss_scale", e.loss_scale},
          {"peak_bytes", e.peak_bytes}};
}

json step_json(const StepReport& s) {
  return {{"epoch", s.epoch},
          {"step", s.step},
          {"loss", s.loss},
          {"accuracy", s.accuracy},
          {"lr", s.lr},
          {"loss_scale", s.loss_scale},
          {"skipped", s.skipped},
          {"grad_norm", s.grad_norm},
          {"wall_seconds", s.wall_seconds}};
}

// A configuration value for people: a float setting (stored as the double of a float) in its shortest float
// form, 0.05 rather than 0.05000000074505806.
std::string value_text(const json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_number_float()) {
    const double v = j.get<double>();
    const float f = static_cast<float>(v);
    if (static_cast<double>(f) == v) {
      char buf[32];
      const auto end = std::to_chars(buf, buf + sizeof buf, f).ptr;
      return std::string(buf, end);
    }
  }
  return j.dump();
}

// The configuration as dotted keys ("precision.loss_scale.kind") with printable values.
void flatten(const json& j, const std::string& prefix, std::map<std::string, std::string>& out) {
  if (j.is_object()) {
    for (const auto& [key, value] : j.items()) flatten(value, prefix.empty() ? key : prefix + "." + key, out);
  } else {
    out[prefix] = value_text(j);
  }
}

std::map<std::string, std::string> flat_config(const RunRecord& r) {
  std::map<std::string, std::string> out;
  flatten(parse_or_null(r.config_json), "", out);
  return out;
}

// --- the commands ---

// Stores are opened Existing: a missing file is an error, a write-protected one is read, not changed.
RunStore open_store(const std::string& path) { return RunStore(path, RunStore::Mode::Existing); }

std::string run_label(const RunRecord& r) { return std::to_string(r.id) + " (" + printable(r.name) + ")"; }

struct RunsOptions {
  std::string status, tag, db;
  bool json = false;
};

int runs_command(const RunsOptions& options) {
  const bool as_json = options.json;
  const std::string& status = options.status;
  const std::string& tag = options.tag;
  const std::string path = store_path(options.db);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {  // no store yet is an empty list, not an error
    if (as_json)
      std::printf("[]\n");
    else
      std::printf("no runs recorded yet (no run store at %s)\n", path.c_str());
    return 0;
  }
  RunStore store(path, RunStore::Mode::Existing);
  json list = json::array();
  Table table(
      {"ID", "NAME", "CREATED (UTC)", "STATUS", "DEPTH", "PRECISION", "DEVICE", "BEST VAL", "EPOCHS", "TIME", "RESUME"},
      {true, false, false, false, true, false, false, true, true, true, false});
  size_t shown = 0;
  for (const RunRecord& r : store.runs()) {
    if (!status.empty() && status != run_status_name(r.status)) continue;
    if (!tag.empty() && std::find(r.tags.begin(), r.tags.end(), tag) == r.tags.end()) continue;
    const RunSummary s = summarize(r, store.epochs(r.id));
    const bool resumable = store.resumable(r.id);
    ++shown;
    if (as_json) {
      json j = run_json(r);
      j["summary"] = summary_json(s);
      j["resumable"] = resumable;
      list.push_back(j);
    } else {
      table.add({std::to_string(r.id), r.name, timestamp(r.created), run_status_name(r.status), std::to_string(r.depth),
                 r.precision, r.device, s.epochs_completed ? percent(s.best_validation_accuracy) : "-",
                 std::to_string(s.epochs_completed) + "/" + std::to_string(r.epochs), duration(s.total_seconds),
                 resumable ? "yes" : ""});
    }
  }
  if (as_json) {
    print_json(list);
  } else if (shown == 0) {
    std::printf("no runs%s in %s\n", status.empty() && tag.empty() ? "" : " match", store.path().c_str());
  } else {
    table.print();
  }
  return 0;
}

struct ShowOptions {
  std::string run, db;
  bool json = false, steps = false;
};

int show_command(const ShowOptions& options) {
  const bool as_json = options.json;
  const bool with_steps = options.steps;
  RunStore store = open_store(store_path(options.db));
  const RunRecord r = store.run(store.resolve(options.run));
  const std::vector<EpochReport> epochs = store.epochs(r.id);
  const RunSummary s = summarize(r, epochs);
  const std::vector<CheckpointInfo> checkpoints = store.checkpoints(r.id);
  if (as_json) {
    json out = {{"run", run_json(r)},
                {"config", parse_or_null(r.config_json)},
                {"info", parse_or_null(r.info_json)},
                {"summary", summary_json(s)},
                {"epochs", json::array()},
                {"checkpoints", json::array()}};
    for (const EpochReport& e : epochs) out["epochs"].push_back(epoch_json(e));
    for (const CheckpointInfo& c : checkpoints)
      out["checkpoints"].push_back({{"epoch", c.epoch}, {"step", c.step}, {"path", c.path}});
    if (with_steps) {
      out["steps"] = json::array();
      for (const StepReport& st : store.steps(r.id)) out["steps"].push_back(step_json(st));
    }
    print_json(out);
    return 0;
  }

  const json info = parse_or_null(r.info_json);
  std::printf("run %s\n", run_label(r).c_str());
  std::printf("  status     %s%s%s\n", run_status_name(r.status), r.end_reason.empty() ? "" : ": ",
              r.end_reason.c_str());
  std::printf("  created    %s   ended %s   wall time %s\n", r.created.c_str(), r.ended.empty() ? "-" : r.ended.c_str(),
              duration(r.duration_seconds).c_str());
  std::printf("  dataset    %s (fingerprint %s)\n", r.dataset_path.c_str(),
              r.dataset_fingerprint.empty() ? "-" : r.dataset_fingerprint.c_str());
  if (info.is_object() && info.contains("train_images"))
    std::printf("             %s training and %s validation images, %zu classes, %d px\n",
                info["train_images"].dump().c_str(), info["validation_images"].dump().c_str(),
                info.value("classes", json::array()).size(), r.image_size);
  if (info.is_object() && info.contains("model"))
    std::printf("  model      %s\n", info["model"].get<std::string>().c_str());
  std::printf("  device     %s\n", r.backend.c_str());
  if (info.is_object() && !info.value("compute", std::string()).empty())
    std::printf("  compute    %s\n", info["compute"].get<std::string>().c_str());
  std::printf("  recorded   by %s on %s (pid %lld)\n",
              r.versions.empty() ? r.ampwb_version.c_str() : r.versions.c_str(), r.host.empty() ? "?" : r.host.c_str(),
              static_cast<long long>(r.pid));
  if (!r.tags.empty()) {
    std::string tags;
    for (const std::string& t : r.tags) {
      if (!tags.empty()) tags += ", ";
      tags += t;
    }
    std::printf("  tags       %s\n", tags.c_str());
  }
  if (!r.notes.empty()) std::printf("  notes      %s\n", r.notes.c_str());

  std::printf("\nconfiguration\n");
  Table config({"SETTING", "VALUE"});
  for (const auto& [key, value] : flat_config(r)) config.add({key, value});
  config.print("  ");

  std::printf("\nepochs\n");
  if (epochs.empty()) {
    std::printf("  (none completed)\n");
  } else {
    Table table({"EPOCH", "TRAIN LOSS", "TRAIN ACC", "VAL LOSS", "VAL ACC", "TOP-K", "SECONDS", "IMAGES/S",
                 "DATA WAIT S", "SKIPPED", "LOSS SCALE", "PEAK"},
                std::vector<bool>(12, true));
    for (const EpochReport& e : epochs)
      table.add({std::to_string(e.epoch), format("%.4f", e.train_loss), percent(e.train_accuracy),
                 format("%.4f", e.validation_loss), percent(e.validation_accuracy), percent(e.validation_topk),
                 format("%.2f", e.seconds), format("%.1f", e.images_per_second), format("%.2f", e.data_wait_seconds),
                 std::to_string(e.skipped_steps), format("%g", e.loss_scale), mebibytes(e.peak_bytes)});
    table.print("  ");
  }

  std::printf("\nsummary\n");
  if (s.epochs_completed) {
    std::printf("  best validation accuracy   %s (epoch %d)\n", percent(s.best_validation_accuracy).c_str(),
                s.best_epoch);
    std::printf("  final validation accuracy  %s   loss %.4f\n", percent(s.final_validation_accuracy).c_str(),
                s.final_validation_loss);
    std::printf("  epochs                     %d of %d, mean %s, %.1f images/s\n", s.epochs_completed, r.epochs,
                duration(s.mean_epoch_seconds).c_str(), s.mean_images_per_second);
    std::printf("  skipped steps              %lld   final loss scale %g   peak memory %s\n",
                static_cast<long long>(s.skipped_steps), s.final_loss_scale, mebibytes(s.peak_bytes).c_str());
  } else {
    std::printf("  no epoch completed\n");
  }
  if (!checkpoints.empty()) {
    std::printf("\ncheckpoints\n");
    for (const CheckpointInfo& c : checkpoints)
      std::printf("  resumes at epoch %d (step %lld): %s\n", c.epoch, static_cast<long long>(c.step), c.path.c_str());
  }
  return 0;
}

struct CompareOptions {
  std::vector<std::string> runs;
  std::string db;
  bool json = false;
};

int compare_command(const CompareOptions& options) {
  const bool as_json = options.json;
  RunStore store = open_store(store_path(options.db));
  std::vector<RunRecord> runs;
  std::vector<RunSummary> summaries;
  for (const std::string& id : options.runs) {
    runs.push_back(store.run(store.resolve(id)));
    summaries.push_back(summarize(runs.back(), store.epochs(runs.back().id)));
  }

  // Settings that differ between the runs, plus where and on what they ran.
  std::vector<std::map<std::string, std::string>> configs;
  for (const RunRecord& r : runs) {
    auto c = flat_config(r);
    c.erase("name");
    c["(device)"] = r.backend;
    c["(dataset fingerprint)"] = r.dataset_fingerprint;
    configs.push_back(std::move(c));
  }
  std::map<std::string, std::vector<std::string>> differences;
  for (const auto& c : configs)
    for (const auto& [key, value] : c) differences[key];
  for (auto it = differences.begin(); it != differences.end();) {
    std::vector<std::string> values;
    for (const auto& c : configs) {
      const auto found = c.find(it->first);
      values.push_back(found == c.end() ? "(unset)" : found->second);
    }
    if (std::all_of(values.begin(), values.end(), [&](const std::string& v) { return v == values[0]; })) {
      it = differences.erase(it);
    } else {
      it->second = std::move(values);
      ++it;
    }
  }

  // Speed-up: training throughput (images/s) against the first run's; 0 where a run has no epoch.
  std::vector<double> speedup;
  for (const RunSummary& s : summaries)
    speedup.push_back(
        summaries[0].mean_images_per_second > 0 ? s.mean_images_per_second / summaries[0].mean_images_per_second : 0.0);

  if (as_json) {
    json out = {{"runs", json::array()}, {"differences", json::object()}};
    for (size_t i = 0; i < runs.size(); ++i) {
      json j = summary_json(summaries[i]);
      j["id"] = runs[i].id;
      j["name"] = runs[i].name;
      j["status"] = run_status_name(runs[i].status);
      j["speedup"] = speedup[i];
      out["runs"].push_back(j);
    }
    for (const auto& [key, values] : differences) out["differences"][key] = values;
    print_json(out);
    return 0;
  }

  std::vector<std::string> header{""};
  for (const RunRecord& r : runs) header.push_back(run_label(r));
  std::printf("configuration differences\n");
  if (differences.empty()) {
    std::printf("  (none: the runs share every setting)\n");
  } else {
    Table table(header);
    for (const auto& [key, values] : differences) {
      std::vector<std::string> row{key};
      row.insert(row.end(), values.begin(), values.end());
      table.add(row);
    }
    table.print("  ");
  }

  std::printf("\nresults\n");
  std::vector<bool> right(runs.size() + 1, true);
  right[0] = false;  // the labels
  Table table(header, right);
  auto row = [&](const std::string& label, auto cell) {
    std::vector<std::string> cells{label};
    for (size_t i = 0; i < runs.size(); ++i) cells.push_back(cell(i));
    table.add(cells);
  };
  row("status", [&](size_t i) { return std::string(run_status_name(runs[i].status)); });
  row("epochs",
      [&](size_t i) { return std::to_string(summaries[i].epochs_completed) + "/" + std::to_string(runs[i].epochs); });
  row("best validation accuracy", [&](size_t i) {
    const RunSummary& s = summaries[i];
    return s.epochs_completed ? percent(s.best_validation_accuracy) + " (epoch " + std::to_string(s.best_epoch) + ")"
                              : std::string("-");
  });
  row("final validation accuracy", [&](size_t i) {
    return summaries[i].epochs_completed ? percent(summaries[i].final_validation_accuracy) : std::string("-");
  });
  row("total time", [&](size_t i) { return duration(summaries[i].total_seconds); });
  row("mean epoch time", [&](size_t i) { return duration(summaries[i].mean_epoch_seconds); });
  row("images/s (training)", [&](size_t i) { return format("%.1f", summaries[i].mean_images_per_second); });
  row("speed-up vs run " + std::to_string(runs[0].id),
      [&](size_t i) { return speedup[i] > 0 ? format("%.2fx", speedup[i]) : std::string("-"); });
  row("skipped steps", [&](size_t i) { return std::to_string(summaries[i].skipped_steps); });
  row("final loss scale", [&](size_t i) {
    return summaries[i].epochs_completed ? format("%g", summaries[i].final_loss_scale) : std::string("-");
  });
  row("peak memory", [&](size_t i) { return mebibytes(summaries[i].peak_bytes); });
  table.print("  ");
  return 0;
}

}  // namespace

void add_run_commands(CLI::App& app, Invocation& invocation) {
  auto runs_options = std::make_shared<RunsOptions>();
  CLI::App* runs = app.add_subcommand("runs", "list the recorded runs");
  runs->add_option("--status", runs_options->status, "only runs with this status")
      ->type_name("STATUS")
      ->check(CLI::IsMember({"running", "finished", "failed", "cancelled", "interrupted"}));
  runs->add_option("--tag", runs_options->tag, "only runs with this tag")->type_name("TAG");
  runs->add_flag("--json", runs_options->json, "as JSON (for scripts)");
  add_db_option(runs, runs_options->db);
  run_on_parse(runs, invocation, runs_options, runs_command);

  auto show_options = std::make_shared<ShowOptions>();
  CLI::App* show = app.add_subcommand("show", "a run's configuration, epochs, summary and checkpoints");
  show->add_option("RUN", show_options->run, "a run id or a unique run name")->type_name("")->required();
  show->add_flag("--json", show_options->json, "as JSON (for scripts)");
  show->add_flag("--steps", show_options->steps, "with --json: every step too");
  add_db_option(show, show_options->db);
  run_on_parse(show, invocation, show_options, show_command);

  auto compare_options = std::make_shared<CompareOptions>();
  CLI::App* compare = app.add_subcommand("compare", "runs side by side: differing settings, results, speed-up");
  compare->add_option("RUN", compare_options->runs, "two or more run ids or names; speed-ups are against the first")
      ->type_name("")
      ->default_str("")
      ->required()
      ->expected(2, -1)
      ->multi_option_policy(CLI::MultiOptionPolicy::Throw);  // the policy that checks the count (TakeLast would not)
  compare->add_flag("--json", compare_options->json, "as JSON (for scripts)");
  add_db_option(compare, compare_options->db);
  run_on_parse(compare, invocation, compare_options, compare_command);
}

}  // namespace ampwb::cli
