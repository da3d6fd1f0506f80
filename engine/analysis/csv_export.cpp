// CSV export of stored runs.
#include "analysis/csv_export.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <regex>
#include <set>
#include <string_view>
#include <type_traits>

#include "analysis/run_compare.h"
#include "analysis/run_speed.h"
#include "analysis/time_comparison.h"
#include "core/float_decimal.h"
#include "train/record_json.h"

namespace ampwb {
namespace fs = std::filesystem;

std::string csv_quote(const std::string& field) {
  if (field.find_first_of(",\"\r\n") == std::string::npos) return field;
  std::string out = "\"";
  for (char c : field) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string csv_text_cell(const std::string& text) {
  const bool formula = !text.empty() && std::string_view("=+-@\t\r").find(text.front()) != std::string_view::npos;
  return csv_quote(formula ? "'" + text : text);
}

std::string csv_number(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof buf, value);
  return std::string(buf, result.ptr);
}

namespace {
// The writer's errors are the store's (StoreError), as the rest of the export's.
template <typename F>
void as_store_error(F&& f) {
  try {
    f();
  } catch (const StoreError&) {
    throw;
  } catch (const Error& e) {
    throw StoreError(e.what());
  }
}
}  // namespace

CsvWriter::CsvWriter(const std::string& path) {
  as_store_error([&] { file_.emplace(path); });
}

CsvWriter::~CsvWriter() = default;  // without close(), AtomicFile removes the partial file

void CsvWriter::put(std::string_view text) {
  as_store_error([&] { file_->write(text); });
}

CsvWriter& CsvWriter::cell(const std::string& quoted) {
  if (row_started_) put(",");
  put(quoted);
  row_started_ = true;
  return *this;
}

CsvWriter& CsvWriter::field(const std::string& text) { return cell(csv_text_cell(text)); }
CsvWriter& CsvWriter::field(double value) { return cell(csv_number(value)); }
CsvWriter& CsvWriter::field(int64_t value) { return cell(std::to_string(value)); }
CsvWriter& CsvWriter::field(uint64_t value) { return cell(std::to_string(value)); }
CsvWriter& CsvWriter::number_or_text(const std::string& text) {
  double number = 0;
  const char* end = text.data() + text.size();
  const auto [at, error] = std::from_chars(text.data(), end, number);
  return error == std::errc() && at == end ? cell(text) : field(text);
}

void CsvWriter::end_row() {
  put("\r\n");
  row_started_ = false;
}

void CsvWriter::close() {
  as_store_error([&] { file_->commit(); });
}

namespace {

// A record's fields as columns (their CSV names) and as one row's values, from its field list.
template <Record R>
void header(CsvWriter& w, const R& record) {
  fields(record, [&](Field f, const auto&) { w.field(f.column); });
}

template <Record R>
void values(CsvWriter& w, const R& record) {
  fields(record, [&](Field, const auto& v) {
    using T = std::decay_t<decltype(v)>;
    if constexpr (std::is_same_v<T, bool>)
      w.field(v ? 1 : 0);
    else if constexpr (std::is_same_v<T, float>)
      w.field(float_as_decimal(v));  // a loss of 2.408041, not 2.408041000366211
    else if constexpr (std::is_floating_point_v<T>)
      w.field(v);
    else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>)
      w.field(static_cast<int64_t>(v));
    else if constexpr (std::is_integral_v<T>)
      w.field(static_cast<uint64_t>(v));  // a seed's 64 bits in full
    else
      w.field(field_text(v));  // enums by name, tags joined by ';'
  });
}

// One run's summary row: the run's columns, its summary's, then the processes that trained it together (each on
// batch_size images) and their images a step in all, then its steady-state speed (analysis/run_speed.h), the
// figure `compare`, `explain` and the report measure speed-ups by: the median step's and its interquartile range;
// then what else the machine did meanwhile (the mean over the epochs' training), without which a speed read from the
// file could not be trusted: the shares of the CPUs' time other programs and other guests (steal) took, nan where
// not recorded, and the warning `compare` gives of the run alone where they were too large to time anything (""
// where the machine was quiet). Last, every setting of its configuration but its name (a column already), as the
// configuration holds it (an image size left to the data is 0), "config.<setting>" (config.precision.fp8.margin), so
// that a sweep's file keeps whatever it swept.
void summary_header(CsvWriter& w) {
  header(w, RunRecord{});
  header(w, RunSummary{});
  for (const char* c : {"processes", "global_batch_size", "steady_images_per_second", "steady_images_per_second_q1",
                        "steady_images_per_second_q3", "steady_steps", "machine_other_work_share",
                        "machine_steal_share", "timing_warning"})
    w.field(c);
  for (const auto& [setting, value] : config_settings(TrainConfig{}))
    if (setting != "name") w.field("config." + setting);  // the run's name is a column already
  w.end_row();
}

void summary_row(CsvWriter& w, const RunRecord& r, const RunSummary& s, const RunSpeed& speed,
                 const MachineLoad& load) {
  values(w, r);
  values(w, s);
  w.field(int64_t{r.info.world_size}).field(r.global_batch_size());
  if (speed.known())
    w.field(speed.images_per_second()).field(speed.images_per_second_q1()).field(speed.images_per_second_q3());
  else
    w.field(RunSummary::kNone).field(RunSummary::kNone).field(RunSummary::kNone);
  w.field(speed.steps);
  w.field(load.other_cpu >= 0 ? load.other_cpu : RunSummary::kNone);
  w.field(load.steal >= 0 ? load.steal : RunSummary::kNone);
  w.field(timing_warning({{r.id, load}}));
  for (const auto& [setting, value] : config_settings(r.config))
    if (setting != "name") w.number_or_text(value);
  w.end_row();
}

}  // namespace

namespace {
// run-<id>-<kind>.csv
std::string run_csv_path(const fs::path& dir, int64_t id, const char* kind) {
  return (dir / ("run-" + std::to_string(id) + "-" + kind + ".csv")).string();
}
}  // namespace

std::vector<std::string> csv_export_files(const std::vector<int64_t>& runs, const std::string& folder) {
  std::vector<std::string> files;
  for (int64_t id : runs)
    for (const char* kind : {"steps", "epochs", "summary"}) files.push_back(run_csv_path(folder, id, kind));
  files.push_back((fs::path(folder) / "runs-summary.csv").string());
  files.push_back((fs::path(folder) / "runs-long.csv").string());
  return files;
}

std::vector<int64_t> runs_exported_before(const std::string& folder, const std::vector<int64_t>& runs) {
  static const std::regex per_run_file(R"(run-(\d+)-(steps|epochs|summary)\.csv)");
  std::set<int64_t> others;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(folder, ec)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (!std::regex_match(name, m, per_run_file)) continue;
    int64_t id = 0;
    const std::string digits = m[1].str();
    if (std::from_chars(digits.data(), digits.data() + digits.size(), id).ec != std::errc()) continue;
    if (std::find(runs.begin(), runs.end(), id) == runs.end()) others.insert(id);
  }
  return {others.begin(), others.end()};
}

std::vector<std::string> export_csv(const RunStore& store, const std::vector<int64_t>& runs,
                                    const std::string& folder) {
  for (int64_t id : runs) store.run(id);  // a run gone (deleted elsewhere) is said before any file is written
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) throw StoreError("cannot create the export folder '" + folder + "': " + ec.message());
  std::vector<std::string> written;
  const fs::path dir(folder);

  CsvWriter all_summary((dir / "runs-summary.csv").string());
  summary_header(all_summary);
  CsvWriter long_form((dir / "runs-long.csv").string());
  for (const char* c : {"run_id", "run_name", "precision", "depth", "batch_size", "epoch", "metric", "value"})
    long_form.field(c);
  long_form.end_row();

  for (int64_t id : runs) {
    const RunRecord r = store.run(id);
    const std::vector<EpochReport> epochs = store.epochs(id);
    const RunSummary s = summarize(r, epochs);

    const std::vector<StepReport> run_steps = store.steps(id);
    const RunSpeed speed = run_timing(r, run_steps, {}).speed;  // compare's figure
    const MachineLoad load = mean_epoch_times(store.epoch_times(id)).load;
    CsvWriter steps(run_csv_path(dir, id, "steps"));
    header(steps.field("run_id"), StepReport{});
    steps.end_row();
    // A run that scales nothing multiplies by 1: its loss scale is said as none (nan), as `show` says "-".
    const bool scaled = r.config.precision.scales_loss();
    for (StepReport st : run_steps) {
      if (!scaled) st.loss_scale = NAN;
      values(steps.field(id), st);
      steps.end_row();
    }
    steps.close();
    written.push_back(run_csv_path(dir, id, "steps"));

    CsvWriter ep(run_csv_path(dir, id, "epochs"));
    header(ep.field("run_id"), EpochReport{});
    ep.end_row();
    for (EpochReport e : epochs) {
      if (!scaled) e.loss_scale = RunSummary::kNone;
      values(ep.field(id), e);
      ep.end_row();
      // The long form: every measurement of the epoch (not the epoch's number, nor the k of its top-k), a row each.
      fields(e, [&](Field f, const auto& value) {
        if (std::string_view(f.key) == "epoch" || std::string_view(f.key) == "topk") return;
        long_form.field(id).field(r.name).field(r.precision_name()).field(r.depth).field(r.batch_size).field(e.epoch);
        long_form.field(f.column).field(static_cast<double>(value));
        long_form.end_row();
      });
    }
    ep.close();
    written.push_back(run_csv_path(dir, id, "epochs"));

    CsvWriter summary(run_csv_path(dir, id, "summary"));
    summary_header(summary);
    summary_row(summary, r, s, speed, load);
    summary.close();
    written.push_back(run_csv_path(dir, id, "summary"));
    summary_row(all_summary, r, s, speed, load);
  }
  all_summary.close();
  written.push_back((dir / "runs-summary.csv").string());
  long_form.close();
  written.push_back((dir / "runs-long.csv").string());
  return written;
}

}  // namespace ampwb
