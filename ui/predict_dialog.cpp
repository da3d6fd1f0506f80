// The prediction dialog: ImagePredictor on the chosen images, on a worker thread, shown as a table.
#include "predict_dialog.h"

#include <QDialogButtonBox>
#include <QHeaderView>
#include <QLabel>
#include <QMetaObject>
#include <QProgressBar>
#include <QScreen>
#include <QScrollBar>
#include <QTableWidget>
#include <QVBoxLayout>
#include <algorithm>
#include <filesystem>
#include <system_error>
#include <vector>

#include "analysis/report_text.h"
#include "data/image_input.h"
#include "plain_text.h"
#include "store/final_weights.h"

namespace ampwb::ui {
namespace {
QString percent(double p) { return QString::fromStdString(percent_text(p)); }

// The folder every path lies in ("" where they share none): rows name their images below it, so that the Image
// column holds what tells them apart, not one long prefix.
std::filesystem::path common_folder(const std::vector<std::string>& paths) {
  if (paths.empty()) return {};
  std::filesystem::path common = std::filesystem::path(paths.front()).parent_path();
  for (const std::string& p : paths) {
    const std::filesystem::path folder = std::filesystem::path(p).parent_path();
    std::filesystem::path shared;
    for (auto a = common.begin(), b = folder.begin(); a != common.end() && b != folder.end() && *a == *b; ++a, ++b)
      shared /= *a;
    common = shared;
  }
  return common;
}
}  // namespace

PredictDialog::PredictDialog(const RunStore& store, int64_t run, const QStringList& images, QWidget* parent, int top)
    : QDialog(parent), top_(top), run_(run) {
  setWindowTitle(tr("Predictions of run %1").arg(run));
  setObjectName("predictDialog");
  auto* layout = new QVBoxLayout(this);
  summary_ = new QLabel;
  summary_->setObjectName("predictSummary");
  summary_->setWordWrap(true);
  summary_->setTextFormat(Qt::PlainText);  // paths and class names as written
  progress_ = new QProgressBar;
  table_ = new QTableWidget(0, 4);
  table_->setObjectName("predictions");
  table_->setHorizontalHeaderLabels({tr("Image"), tr("Class"), tr("Probability"), tr("Top %1").arg(top)});
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->verticalHeader()->hide();
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  layout->addWidget(summary_);
  layout->addWidget(progress_);
  layout->addWidget(table_);
  layout->addWidget(buttons);
  resize(760, 420);

  ModelWeights weights;
  try {  // what can be refused at once is: the images listed, the weights read and checked
    std::vector<std::string> paths;
    for (const QString& image : images) paths.push_back(image.toStdString());
    paths_ = image_files_in(paths, &left_out_);
    weights = load_final_weights(store, run);
  } catch (const std::exception& e) {
    finish(QString::fromUtf8(e.what()));
    return;
  }
  classes_ = weights.preprocessing.class_names;
  image_size_ = weights.preprocessing.image_size;
  const int k = std::min(top_, static_cast<int>(classes_.size()));
  table_->horizontalHeaderItem(3)->setText(tr("Top %1").arg(k));
  const std::filesystem::path folder = common_folder(paths_);
  folder_ = QString::fromStdString(folder.string());
  table_->setRowCount(static_cast<int>(paths_.size()));
  for (size_t i = 0; i < paths_.size(); ++i) {  // each row names its image while it waits, below their folder
    const std::string shown =
        folder.empty() ? paths_[i] : std::filesystem::path(paths_[i]).lexically_relative(folder).string();
    auto* item = new QTableWidgetItem(QString::fromStdString(shown));
    item->setToolTip(plain_tooltip(QString::fromStdString(paths_[i])));
    table_->setItem(static_cast<int>(i), 0, item);
  }
  progress_->setRange(0, static_cast<int>(paths_.size()));
  progress_->setValue(0);
  summary_->setText(paths_.size() == 1
                        ? tr("Classifying 1 image with run %1's final weights…").arg(run)
                        : tr("Classifying %1 images with run %2's final weights…").arg(paths_.size()).arg(run));
  try {
    worker_ = std::thread([this, weights = std::move(weights)]() mutable { classify(std::move(weights)); });
  } catch (const std::system_error& e) {
    finish(tr("cannot start the classification: %1").arg(QString::fromUtf8(e.what())));
  }
}

void PredictDialog::classify(ModelWeights weights) {
  constexpr size_t kChunk = 8;  // images between two looks at stop_: well under a second at 224 px
  QString error;
  try {
    if (stop_) return;
    ImagePredictor predictor(std::move(weights));
    for (size_t first = 0; first < paths_.size() && !stop_; first += kChunk) {
      const std::vector<std::string> chunk(
          paths_.begin() + static_cast<std::ptrdiff_t>(first),
          paths_.begin() + static_cast<std::ptrdiff_t>(std::min(paths_.size(), first + kChunk)));
      std::vector<ImageLogits> results = predictor.logits(chunk, static_cast<int>(kChunk));
      // Queued to this dialog: dropped with it if it is gone (its destructor joins this thread first).
      QMetaObject::invokeMethod(
          this, [this, first, results = std::move(results)] { show_rows(first, results); }, Qt::QueuedConnection);
    }
  } catch (const std::exception& e) {
    error = QString::fromUtf8(e.what());
  } catch (...) {
    error = tr("the classification failed with an error of unknown kind");
  }
  QMetaObject::invokeMethod(
      this, [this, error] { finish(error); }, Qt::QueuedConnection);
}

PredictDialog::~PredictDialog() {
  stop_ = true;
  if (worker_.joinable()) worker_.join();
}

void PredictDialog::show_rows(size_t first, const std::vector<ImageLogits>& results) {
  const int k = std::min(top_, static_cast<int>(classes_.size()));
  for (size_t i = 0; i < results.size(); ++i) {
    const int row = static_cast<int>(first + i);
    if (!results[i].unreadable.empty()) {  // its reason is shown once the columns are sized (finish)
      unreadable_rows_.push_back(row);
      table_->setItem(row, 1, new QTableWidgetItem(QString::fromStdString(results[i].unreadable)));
      continue;
    }
    const std::vector<double> p = softmax(results[i].logits);
    const std::vector<int> best = top_classes(results[i].logits, k);
    QStringList ranked;
    for (int c : best) ranked << QStringLiteral("%1 %2").arg(QString::fromStdString(classes_[c]), percent(p[c]));
    table_->setItem(row, 1, new QTableWidgetItem(QString::fromStdString(classes_[best[0]])));
    table_->setItem(row, 2, new QTableWidgetItem(percent(p[best[0]])));
    table_->setItem(row, 3, new QTableWidgetItem(ranked.join(QStringLiteral(", "))));
  }
  progress_->setValue(static_cast<int>(first + results.size()));
}

void PredictDialog::fit_columns() {
  // The image's name takes at most a third of the table: the classes and their probabilities are what it shows.
  const auto cap_image = [this](int table) { table_->setColumnWidth(0, std::min(table_->columnWidth(0), table / 3)); };
  if (!isVisible()) return cap_image(table_->viewport()->width());  // not laid out: no width to widen from
  // What the other columns' contents need: the last one is stretched, so its own width does not say.
  const int rest = table_->columnWidth(1) + table_->columnWidth(2) +
                   std::max(static_cast<const QAbstractItemView*>(table_)->sizeHintForColumn(3),
                            table_->horizontalHeader()->sectionSizeHint(3));
  // Around the columns: the dialog's margins, the table's frame and the vertical scroll bar where the rows need one.
  const bool scrolls = table_->verticalHeader()->length() > table_->viewport()->height();
  const int chrome = width() - table_->width() + 2 * table_->frameWidth() +
                     (scrolls ? table_->verticalScrollBar()->sizeHint().width() : 0);
  const QRect free = screen()->availableGeometry();
  const int room = free.width() - (frameGeometry().width() - width()) - chrome;  // the widest the columns can be
  const int now = width() - chrome;
  cap_image(std::max(now, std::min(table_->columnWidth(0) + rest, room)));
  // Wide enough for every column where the screen is (a 10-class run's Top 5 scrolled at 760 px), kept on it.
  const int wanted = std::min(table_->columnWidth(0) + rest, room);
  if (wanted <= now) return;
  resize(wanted + chrome, height());
  if (const int outside = frameGeometry().right() - free.right(); outside > 0)
    move(std::max(free.left(), x() - outside), y());
}

void PredictDialog::finish(const QString& error) {
  finished_ = true;
  progress_->hide();
  if (!error.isEmpty()) {  // the rows already classified stay
    error_ = error;
    summary_->setText(error_);
    if (progress_->value() <= 0) table_->hide();  // -1: the bar was never started
    return;
  }
  // The reasons are taken out while the columns are sized, which would fit column 1 to a reason that spans three.
  std::vector<QString> reasons;
  for (int row : unreadable_rows_) reasons.push_back(table_->takeItem(row, 1)->text());
  table_->resizeColumnsToContents();
  fit_columns();
  for (size_t i = 0; i < unreadable_rows_.size(); ++i) {
    auto* item = new QTableWidgetItem(tr("not classified: %1").arg(reasons[i]));
    item->setToolTip(plain_tooltip(reasons[i]));  // whole, where the row cuts it
    table_->setItem(unreadable_rows_[i], 1, item);
    table_->setSpan(unreadable_rows_[i], 1, 1, 3);
  }
  // The images classified: one that could not be read is counted apart, below.
  const size_t classified = paths_.size() - unreadable_rows_.size();
  QString summary =
      (classified == 1 ? tr("1 image classified") : tr("%1 images classified").arg(classified)) +
      tr(" by run %1's final weights in FP32 (%2 classes, %3 px)").arg(run_).arg(classes_.size()).arg(image_size_);
  if (!folder_.isEmpty()) summary += tr("; the images below %1").arg(folder_);  // the rows name them from there
  if (!left_out_.empty()) {  // a folder's GIFs or notes, not to be taken for classified
    QStringList names;
    for (size_t i = 0; i < std::min<size_t>(3, left_out_.size()); ++i)
      names << QString::fromStdString(std::filesystem::path(left_out_[i]).filename().string());
    if (left_out_.size() > 3) names << tr("…");
    summary +=
        left_out_.size() == 1
            ? tr("; 1 file left out, not an image by its name (%1)").arg(names.join(", "))
            : tr("; %1 files left out, not images by their names (%2)").arg(left_out_.size()).arg(names.join(", "));
  }
  if (unreadable_rows_.size() == 1)  // said whole here: its row may be too narrow for it
    summary += tr("; 1 could not be read: %1").arg(reasons.front());
  else if (!unreadable_rows_.empty())
    summary += tr("; %n could not be read (each row says why; its tooltip says it whole)", nullptr,
                  static_cast<int>(unreadable_rows_.size()));
  summary_->setText(summary);
}

}  // namespace ampwb::ui
