// CSV export of stored runs.
#include "store/csv_export.h"

#include <charconv>
#include <cmath>
#include <filesystem>

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

CsvWriter& CsvWriter::field(const std::string& text) {
  if (row_started_) put(",");
  put(csv_quote(text));
  row_started_ = true;
  return *this;
}

CsvWriter& CsvWriter::field(double value) { return field(csv_number(value)); }
CsvWriter& CsvWriter::field(int64_t value) { return field(std::to_string(value)); }

void CsvWriter::end_row() {
  put("\r\n");
  row_started_ = false;
}

void CsvWriter::close() {
  as_store_error([&] { file_->commit(); });
}

namespace {

const char* const kSummaryColumns[] = {"run_id",
                                       "name",
                                       "status",
                                       "end_reason",
                                       "created",
                                       "ended",
                                       "depth",
                                       "precision",
                                       "batch_size",
                                       "learning_rate",
                                       "optimizer",
                                       "epochs_planned",
                                       "epochs_completed",
                                       "image_size_pixels",
                                       "seed",
                                       "device",
                                       "backend",
                                       "dataset_path",
                                       "dataset_fingerprint",
                                       "best_validation_accuracy",
                                       "best_epoch",
                                       "final_validation_accuracy",
                                       "final_validation_loss",
                                       "final_train_loss",
                                       "total_seconds",
                                       "mean_epoch_seconds",
                                       "mean_images_per_second",
                                       "skipped_steps",
                                       "final_loss_scale",
                                       "peak_bytes",
                                       "tags",
                                       "notes"};

void summary_header(CsvWriter& w) {
  for (const char* c : kSummaryColumns) w.field(c);
  w.end_row();
}

void summary_row(CsvWriter& w, const RunRecord& r, const RunSummary& s) {
  std::string tags;
  for (const std::string& tag : r.tags) {
    if (!tags.empty()) tags += ';';
    tags += tag;
  }
  w.field(r.id).field(r.name).field(run_status_name(r.status)).field(r.end_reason).field(r.created).field(r.ended);
  w.field(r.depth).field(r.precision).field(r.batch_size).field(r.lr).field(r.optimizer).field(r.epochs);
  w.field(s.epochs_completed).field(r.image_size).field(std::to_string(r.seed)).field(r.device).field(r.backend);
  w.field(r.dataset_path).field(r.dataset_fingerprint).field(s.best_validation_accuracy).field(s.best_epoch);
  w.field(s.final_validation_accuracy).field(s.final_validation_loss).field(s.final_train_loss);
  w.field(s.total_seconds).field(s.mean_epoch_seconds).field(s.mean_images_per_second).field(s.skipped_steps);
  w.field(s.final_loss_scale).field(static_cast<int64_t>(s.peak_bytes)).field(tags).field(r.notes);
  w.end_row();
}

// The epoch metrics of the long-form file: column name (with its unit) and value.
std::vector<std::pair<const char*, double>> epoch_metrics(const EpochReport& e) {
  return {{"train_loss", e.train_loss},
          {"train_accuracy", e.train_accuracy},
          {"validation_loss", e.validation_loss},
          {"validation_accuracy", e.validation_accuracy},
          {"validation_topk_accuracy", e.validation_topk},
          {"seconds", e.seconds},
          {"images_per_second", e.images_per_second},
          {"data_wait_seconds", e.data_wait_seconds},
          {"compute_seconds", e.compute_seconds},
          {"skipped_steps", static_cast<double>(e.skipped_steps)},
          {"loss_scale", e.loss_scale},
          {"peak_bytes", static_cast<double>(e.peak_bytes)}};
}

}  // namespace

std::vector<std::string> export_csv(const RunStore& store, const std::vector<int64_t>& runs,
                                    const std::string& folder) {
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
    const std::string prefix = "run-" + std::to_string(id) + "-";

    CsvWriter steps((dir / (prefix + "steps.csv")).string());
    for (const char* c : {"run_id", "epoch", "step", "loss", "accuracy", "learning_rate", "loss_scale", "skipped",
                          "grad_norm", "wall_seconds"})
      steps.field(c);
    steps.end_row();
    for (const StepReport& st : store.steps(id)) {
      steps.field(id).field(st.epoch).field(st.step).field(static_cast<double>(st.loss));
      steps.field(static_cast<double>(st.accuracy)).field(static_cast<double>(st.lr));
      steps.field(static_cast<double>(st.loss_scale)).field(st.skipped ? 1 : 0);
      steps.field(static_cast<double>(st.grad_norm)).field(st.wall_seconds);
      steps.end_row();
    }
    steps.close();
    written.push_back((dir / (prefix + "steps.csv")).string());

    CsvWriter ep((dir / (prefix + "epochs.csv")).string());
    for (const char* c : {"run_id", "epoch", "train_loss", "train_accuracy", "validation_loss", "validation_accuracy",
                          "validation_topk_accuracy", "topk", "seconds", "images_per_second", "data_wait_seconds",
                          "compute_seconds", "skipped_steps", "loss_scale", "peak_bytes"})
      ep.field(c);
    ep.end_row();
    for (const EpochReport& e : epochs) {
      ep.field(id).field(e.epoch).field(e.train_loss).field(e.train_accuracy).field(e.validation_loss);
      ep.field(e.validation_accuracy).field(e.validation_topk).field(e.topk).field(e.seconds);
      ep.field(e.images_per_second).field(e.data_wait_seconds).field(e.compute_seconds).field(e.skipped_steps);
      ep.field(e.loss_scale).field(static_cast<int64_t>(e.peak_bytes));
      ep.end_row();
      for (const auto& [metric, value] : epoch_metrics(e)) {
        long_form.field(id).field(r.name).field(r.precision).field(r.depth).field(r.batch_size).field(e.epoch);
        long_form.field(metric).field(value);
        long_form.end_row();
      }
    }
    ep.close();
    written.push_back((dir / (prefix + "epochs.csv")).string());

    CsvWriter summary((dir / (prefix + "summary.csv")).string());
    summary_header(summary);
    summary_row(summary, r, s);
    summary.close();
    written.push_back((dir / (prefix + "summary.csv")).string());
    summary_row(all_summary, r, s);
  }
  all_summary.close();
  written.push_back((dir / "runs-summary.csv").string());
  long_form.close();
  written.push_back((dir / "runs-long.csv").string());
  return written;
}

}  // namespace ampwb
