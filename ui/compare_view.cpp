// CompareView: loading runs, the charts and the table with its controls.
#include "compare_view.h"

#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QResizeEvent>
#include <QScrollArea>
#include <QScrollBar>
#include <QSettings>
#include <QSplitter>
#include <QTabWidget>
#include <QTableView>
#include <QTableWidget>
#include <QTimer>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "analysis/report_text.h"
#include "analysis/run_speed.h"
#include "analysis/time_comparison.h"
#include "chart_panel.h"
#include "compare_model.h"
#include "diagnosis_panel.h"
#include "numerics_heatmap.h"
#include "run_groups.h"
#include "store/run_record.h"
#include "store_reader.h"
#include "text_lines_area.h"
#include "whole_number_box.h"

namespace ampwb::ui {
namespace {
constexpr int kGroupsTab = 2;  // in details_, after the side-by-side table and the diagnosis
}  // namespace

CompareView::CompareView(RunStore& store, QWidget* parent, const std::string& location)
    : QWidget(parent), store_(store), reader_(new StoreReader(location.empty() ? store.path() : location, this)) {
  setObjectName("compareView");
  title_ = new QLabel(tr("Select runs in the Runs view and choose Open / compare."));
  title_->setObjectName("compareTitle");
  title_->setTextFormat(Qt::PlainText);  // it names the run: user text, never HTML
  // A long name wraps, or where it has no space to wrap at, is cut: it must not widen the window past the screen.
  title_->setWordWrap(true);
  title_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  QFont bold = title_->font();
  bold.setBold(true);
  title_->setFont(bold);
  charts_ = new ChartPanel;
  model_ = new CompareModel(this);

  differences_ = new QCheckBox(tr("Differences only"));
  differences_->setObjectName("differencesOnly");
  connect(differences_, &QCheckBox::toggled, model_, &CompareModel::set_differences_only);
  differences_->setEnabled(false);  // until two runs are open (show_runs)
  differences_->setToolTip(tr("Open two runs or more to see only their differences"));
  follow_ = new QTimer(this);
  follow_->setSingleShot(true);
  follow_->setInterval(3000);
  connect(follow_, &QTimer::timeout, this, &CompareView::follow_store);
  baseline_ = new QComboBox;
  baseline_->setObjectName("baseline");
  baseline_->setSizeAdjustPolicy(QComboBox::AdjustToContents);  // the whole label: "4 · fp32 · seed 0", not "4 · s…"
  baseline_->setMaximumWidth(48 *
                             baseline_->fontMetrics().averageCharWidth());  // a long name must not widen the window
  connect(baseline_, &QComboBox::currentIndexChanged, this, [this](int i) {
    if (i < 0) return;
    model_->set_baseline(i);
    diagnosis_->set_baseline(static_cast<size_t>(i));
    update_time();
  });
  at_epoch_ = new WholeNumberBox(0, 100000);
  at_epoch_->setObjectName("atEpoch");
  at_epoch_->set_minimum_text(tr("last common"));
  connect(at_epoch_, &QSpinBox::valueChanged, model_, &CompareModel::set_at_epoch);
  summary_ = new QLabel;
  summary_->setObjectName("compareSummary");
  summary_->setWordWrap(true);
  summary_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);  // as the title: never wider than the view
  time_ = new QLabel;
  time_->setObjectName("compareTime");
  time_->setTextFormat(Qt::PlainText);  // it names the runs: user text, never HTML
  time_->setWordWrap(true);
  time_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);

  table_ = new QTableView;
  table_->setObjectName("compareTable");
  table_->setModel(model_);
  table_->verticalHeader()->hide();
  // A run's header longer than its column (its name, "(baseline)") loses its end, not both ends as centred text.
  table_->horizontalHeader()->setDefaultAlignment(Qt::AlignLeft | Qt::AlignVCenter);
  table_->setAlternatingRowColors(true);
  table_->setWordWrap(false);
  table_->verticalHeader()->setDefaultSectionSize(table_->fontMetrics().height() + 6);
  // A row whose values take two lines (a speed and its interquartile range) as high as they need; the rest stay one
  // line high, so that the table shows as many rows as it can.
  connect(model_, &QAbstractItemModel::modelReset, table_, [this] {
    for (int row = 0; row < model_->rowCount(); ++row)
      for (int column = 1; column < model_->columnCount(); ++column)
        if (model_->index(row, column).data().toString().contains('\n')) {
          table_->resizeRowToContents(row);
          break;
        }
  });

  // The table's controls beside its tabs, not on a row of their own: at 1366×768 that row is a result's.
  auto* table_controls = new QWidget;
  auto* controls = new QHBoxLayout(table_controls);
  controls->setContentsMargins(12, 0, 4, 0);
  controls->addWidget(differences_);
  controls->addSpacing(12);
  controls->addWidget(new QLabel(tr("Baseline")));
  controls->addWidget(baseline_);
  controls->addSpacing(12);
  controls->addWidget(new QLabel(tr("Metrics at epoch")));
  controls->addWidget(at_epoch_);
  auto* bottom = new QWidget;
  auto* bl = new QVBoxLayout(bottom);
  bl->setContentsMargins(4, 0, 4, 4);
  auto* speed_text = new QWidget;
  speed_text->setObjectName("compareText");
  auto* tl = new QVBoxLayout(speed_text);
  tl->setContentsMargins(0, 0, 0, 0);
  tl->addWidget(summary_);
  tl->addWidget(time_);
  tl->addStretch(1);
  // A step-time and an alternation line each for two runs, scrolling past four lines (fit_speed_lines).
  speed_lines_ = text_lines_area(speed_text, 4);
  bl->addWidget(speed_lines_);
  diagnosis_ = new DiagnosisPanel;
  details_ = new QTabWidget;
  details_->setObjectName("compareDetails");
  details_->setDocumentMode(true);
  details_->setCornerWidget(table_controls, Qt::TopRightCorner);
  details_->addTab(table_, tr("Side by side"));
  details_->addTab(diagnosis_, tr("Diagnosis"));
  groups_ = new QTableWidget;
  groups_->setObjectName("compareGroups");
  groups_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  groups_->setSelectionBehavior(QAbstractItemView::SelectRows);
  groups_->verticalHeader()->hide();
  groups_->setWordWrap(false);
  details_->addTab(groups_, tr("Groups (mean ± std)"));
  details_->setTabVisible(kGroupsTab, false);  // until the charts are grouped
  connect(charts_, &ChartPanel::group_by_changed, this, &CompareView::update_groups);
  bl->addWidget(details_, 1);

  auto* splitter = new QSplitter(Qt::Vertical);
  splitter->setObjectName("compareSplitter");
  splitter->addWidget(charts_);
  splitter->addWidget(bottom);
  // Three fifths for the charts' two rows, the rest for the speed lines and a table of at least a handful of rows.
  splitter->setStretchFactor(0, 3);
  splitter->setStretchFactor(1, 2);
  // Room the user gives the table stays given: the sizes last dragged to are the next window's.
  splitter->restoreState(QSettings().value("compare/splitter").toByteArray());
  connect(splitter, &QSplitter::splitterMoved, this,
          [splitter] { QSettings().setValue("compare/splitter", splitter->saveState()); });
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addWidget(title_);
  layout->addWidget(splitter, 1);
}

void CompareView::set_runs(const std::vector<int64_t>& ids) {
  ++reading_;                              // a follow_store read begun before is older than this one
  ReadRuns read = read_runs(store_, ids);  // a run missing throws here, the comparison shown left as it was
  dropped_.clear();
  // Other runs: a choice made for the last ones may mean nothing for these (an epoch they never reached, FP8's
  // shares beside runs without FP8), so the layers' measure and the metrics' epoch start from their defaults again.
  if (ids != ids_) {
    charts_->numerics()->follow_run();
    at_epoch_->setValue(0);
  }
  show_runs(std::move(read));
  if (isVisible() && !follow_->isActive()) follow_->start();  // chosen while shown: followed from now
}

std::string CompareView::stamp(const RunRecord& r) {
  std::string tags;
  for (const std::string& t : r.tags) tags += t + '\n';
  return r.updated + '\n' + run_status_name(r.status) + '\n' + r.name + '\n' + r.notes + '\n' + tags;
}

CompareView::ReadRuns CompareView::read_runs(const RunStore& store, const std::vector<int64_t>& ids) {
  ReadRuns read;
  for (int64_t id : ids) {
    try {
      read.runs.push_back(load_evidence(store, id));
      read.diagnosis_errors.emplace_back();
    } catch (const std::exception& e) {
      // A damaged record only the diagnosis reads leaves the charts and the table shown; the diagnosis says why
      // not. What the charts cannot do without throws on.
      RunEvidence charted = load_charted_evidence(store, id);
      charted.times = store.epoch_times(id);
      charted.alternating = store.alternating_speed(id);
      read.runs.push_back(std::move(charted));
      read.diagnosis_errors.push_back(QString::fromUtf8(e.what()));
    }
  }
  return read;
}

void CompareView::load(const std::vector<int64_t>& ids) {
  ++reading_;  // a follow_store read begun before is older than this one
  show_runs(read_runs(store_, ids));
  if (isVisible() && !follow_->isActive()) follow_->start();  // chosen while shown: followed from now
}

void CompareView::show_runs(ReadRuns read) {
  std::vector<RunEvidence>& runs = read.runs;
  std::vector<int64_t> ids;
  std::vector<std::unique_ptr<RunSeries>> series;
  std::vector<ComparedRun> compared;
  std::vector<TrainConfig> configs;
  for (const RunEvidence& r : runs) {
    ids.push_back(r.run.id);
    series.push_back(std::make_unique<RunSeries>(run_series(r)));
    compared.push_back({r.run, r.epochs, r.histograms, r.steps, r.times, r.alternating, r.layers});
    configs.push_back(r.run.config);
  }
  const bool new_runs = ids != ids_;  // not the same runs read again (follow_store)
  // Runs left after others were deleted elsewhere keep their colours: a curve followed by its colour stays so.
  const bool some_left = std::all_of(ids.begin(), ids.end(),
                                     [&](int64_t id) { return std::find(ids_.begin(), ids_.end(), id) != ids_.end(); });
  for (size_t i = 0; i < ids.size(); ++i) {
    const auto before = std::find(ids_.begin(), ids_.end(), ids[i]);
    series[i]->colour = some_left ? series_[static_cast<size_t>(before - ids_.begin())]->colour_index(
                                        static_cast<size_t>(before - ids_.begin()))
                                  : static_cast<int>(i);
  }
  ids_ = ids;
  series_ = std::move(series);
  stamps_.clear();
  for (const RunEvidence& r : runs) stamps_.push_back(stamp(r.run));
  seed_only_ = differ_only_by_seed(configs);

  // The baseline stays the run it was where that run is compared still; else it is the first FP32 run (what AMP's
  // speed-ups are measured against), else the first run.
  const auto kept = std::find(ids.begin(), ids.end(), baseline_->currentData().toLongLong());
  const auto fp32 = std::find_if(configs.begin(), configs.end(),
                                 [](const TrainConfig& c) { return c.precision.mode == PrecisionMode::Fp32; });
  const int baseline = kept != ids.end()       ? static_cast<int>(kept - ids.begin())
                       : fp32 != configs.end() ? static_cast<int>(fp32 - configs.begin())
                                               : 0;
  model_->set_runs(std::move(compared));
  {
    const QSignalBlocker block(baseline_);
    baseline_->clear();
    for (const RunEvidence& r : runs)
      baseline_->addItem(QString::fromStdString(run_label(r.run)), QVariant::fromValue<qlonglong>(r.run.id));
    baseline_->setCurrentIndex(baseline);
  }
  model_->set_baseline(baseline_->currentIndex());
  // A single run differs from nothing: the choice waits, ticked or not, for two runs or more.
  differences_->setEnabled(ids.size() > 1);
  differences_->setToolTip(ids.size() > 1 ? tr("Only the rows where the runs differ")
                                          : tr("A single run differs from nothing, so every row shows: open two runs "
                                               "or more to see only their differences"));
  // A run's column as wide as its values, up to a width that leaves three runs side by side beside the setup panel
  // at 1366 px: a device line or a path would otherwise make one run fill the view. The room the view has left goes
  // to the columns cut short, so that a speed-up's interval shows whole where it can; a longer value ends in "…" and
  // shows whole in its tooltip. Sized for a new list of runs only, so a column the user widened stays so.
  if (new_runs) {
    table_->resizeColumnsToContents();
    const int widest = 36 * table_->fontMetrics().averageCharWidth();
    std::vector<int> wanted(static_cast<size_t>(model_->columnCount()));
    // Its rows outnumber the lines it shows: the vertical scroll bar's room is not the columns', shown yet or not.
    const QScrollBar* rows_bar = table_->verticalScrollBar();
    int spare = table_->viewport()->width() - table_->columnWidth(0) -
                (rows_bar->isVisible() ? 0 : rows_bar->sizeHint().width());
    for (int column = 1; column < model_->columnCount(); ++column) {
      wanted[static_cast<size_t>(column)] = table_->columnWidth(column);
      table_->setColumnWidth(column, std::min(table_->columnWidth(column), widest));
      spare -= table_->columnWidth(column);
    }
    for (bool widened = true; spare > 0 && widened;) {  // in equal shares, each up to what it wants
      std::vector<int> short_of;
      for (int column = 1; column < model_->columnCount(); ++column)
        if (table_->columnWidth(column) < wanted[static_cast<size_t>(column)]) short_of.push_back(column);
      const int share = short_of.empty() ? 0 : std::max(1, spare / static_cast<int>(short_of.size()));
      widened = false;
      for (int column : short_of) {
        const int more = std::min({share, spare, wanted[static_cast<size_t>(column)] - table_->columnWidth(column)});
        table_->setColumnWidth(column, table_->columnWidth(column) + more);
        spare -= more;
        widened = widened || more > 0;
      }
    }
  }
  diagnosis_->set_runs(std::move(runs), std::move(read.diagnosis_errors));
  diagnosis_->set_baseline(static_cast<size_t>(std::max(0, baseline_->currentIndex())));

  RunList drawn;
  for (const auto& s : series_) drawn.push_back(s.get());
  QStringList id_text;
  for (int64_t id : ids) id_text << QString::number(id);
  charts_->set_export_prefix(ids.size() == 1 ? "run-" + id_text[0] : "compare-" + id_text.join('-'));
  charts_->set_runs(drawn);
  charts_->set_group_keys(varying_keys(configs));  // seed-only runs start grouped by everything but the seed
  QString title = ids.empty()       ? tr("No runs left to compare.")
                  : ids.size() == 1 ? tr("Run %1").arg(QString::fromStdString(series_[0]->label))
                                    : tr("Comparing %1 runs").arg(ids.size());
  if (!dropped_.isEmpty()) {
    // The first few by name, the rest counted: the title stays a line or two however many went.
    constexpr int kNamed = 3;
    QString names = QStringList(dropped_.mid(0, kNamed)).join(", ");
    if (dropped_.size() > kNamed) names += tr(" and %n more", nullptr, static_cast<int>(dropped_.size()) - kNamed);
    title += tr(" (%1 deleted from the run store, so no longer shown)").arg(names);
  }
  title_->setText(title);
  update_summary();
  update_time();
  // The groups' table followed set_group_keys, through group_by_changed.
}

std::vector<int64_t> CompareView::run_ids_baseline_first() const {
  std::vector<int64_t> ids = ids_;
  const auto baseline = std::find(ids.begin(), ids.end(), baseline_->currentData().toLongLong());
  if (baseline != ids.end()) std::rotate(ids.begin(), baseline, baseline + 1);
  return ids;
}

std::vector<size_t> CompareView::colours_baseline_first() const {
  std::vector<size_t> colours;
  for (size_t i = 0; i < series_.size(); ++i) colours.push_back(static_cast<size_t>(series_[i]->colour_index(i)));
  const auto baseline = std::find(ids_.begin(), ids_.end(), baseline_->currentData().toLongLong());
  if (baseline != ids_.end() && colours.size() == ids_.size()) {
    const auto at = colours.begin() + (baseline - ids_.begin());
    std::rotate(colours.begin(), at, at + 1);
  }
  return colours;
}

void CompareView::update_time() {
  const Comparison& c = model_->comparison();
  const size_t base = c.baseline;
  QStringList lines;
  for (const std::string& warning : {c.work_warning, c.timing_warning})
    if (!warning.empty()) lines << QStringLiteral("\u26a0 ") + QString::fromStdString(warning);
  for (size_t i = 0; i < c.timings.size() && base < c.timings.size(); ++i) {
    if (i == base) continue;
    const TimeComparison t = compare_times(c.timings[base], c.timings[i]);
    lines << tr("Step time, %1 against %2: %3")
                 .arg(QString::fromStdString(series_[i]->label), QString::fromStdString(series_[base]->label),
                      t.available ? QString::fromStdString(t.sentence)
                                  : tr("none to compare, %1").arg(QString::fromStdString(t.unavailable())));
  }
  // Beside the trainings' own figures, the one their sweep timed in alternation, where the machine's drift fell on
  // every configuration alike (the warning above says where other work shared its turns too).
  for (size_t i = 0; i < c.alternating.size() && base < c.alternating.size(); ++i)
    if (i != base && c.alternating[i].known())
      lines << tr("Timed in alternation after their sweep, %1 against %2: %3")
                   .arg(QString::fromStdString(series_[i]->label), QString::fromStdString(series_[base]->label),
                        QString::fromStdString(speed_up_text(c.alternating[i])));
  time_->setText(lines.join('\n'));
  time_->setVisible(!lines.isEmpty());
  fit_speed_lines();
}

void CompareView::update_groups() {
  const QString key = charts_->options().group_by;
  details_->setTabVisible(kGroupsTab, !key.isEmpty() && !series_.empty());
  if (key.isEmpty() || series_.empty()) {
    if (details_->currentIndex() == kGroupsTab) details_->setCurrentIndex(0);
    return;
  }
  std::vector<TrainConfig> configs;
  for (const auto& s : series_) configs.push_back(s->config);
  const std::vector<ConfigGroup> groups = group_configs(configs, key.toStdString());
  const Comparison& comparison = model_->comparison();
  struct Column {
    const char* metric;  // group_metrics' name
    QString header;
    int decimals;
  };
  const Column columns[] = {{"best validation accuracy (%)", tr("best val. acc. (%)"), 2},
                            {"final validation accuracy (%)", tr("final val. acc. (%)"), 2},
                            {"final validation loss", tr("final val. loss"), 4},
                            {"training images/s (steady state)", tr("training images/s"), 0},
                            {"epoch time (s)", tr("epoch time (s)"), 2},
                            {"run time (s)", tr("run time (s)"), 1},
                            {"skipped steps", tr("skipped steps"), 1}};
  QStringList headers{tr("group"), tr("runs")};
  for (const Column& c : columns) headers << c.header;
  groups_->setColumnCount(headers.size());
  groups_->setHorizontalHeaderLabels(headers);
  groups_->setRowCount(static_cast<int>(groups.size()));
  for (int row = 0; row < groups_->rowCount(); ++row) {
    const ConfigGroup& g = groups[static_cast<size_t>(row)];
    QStringList runs;
    for (size_t i : g.members) runs << QString::number(ids_[i]);
    QStringList cells{QString::fromStdString(group_label(key.toStdString(), g)), runs.join(", ")};
    const std::vector<GroupMetric> metrics = group_metrics(comparison.summaries, comparison.speeds(), g);
    for (const Column& c : columns)
      for (const GroupMetric& m : metrics)
        if (m.metric == c.metric) cells << QString::fromStdString(mean_std_text(m, c.decimals));
    for (int column = 0; column < cells.size(); ++column) {
      auto* item = new QTableWidgetItem(cells[column]);
      if (column > 1) item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
      groups_->setItem(row, column, item);
    }
  }
  groups_->resizeColumnsToContents();
}

void CompareView::reload() {
  if (!ids_.empty()) load(ids_);
}

void CompareView::showEvent(QShowEvent* event) {
  QWidget::showEvent(event);
  follow_store();
}

void CompareView::follow_store() {
  if (!isVisible() || ids_.empty()) return;
  follow_->start();
  if (reader_->busy()) return;  // one read at a time
  // Read on the reader's thread: a long run's steps, or a server out of reach, must not hold the window.
  struct Found {
    std::vector<size_t> gone;  // positions in ids_ of the runs deleted
    ReadRuns runs;             // the runs left, read again; none when nothing changed
  };
  auto found = std::make_shared<Found>();
  const bool running =
      std::any_of(series_.begin(), series_.end(), [](const auto& s) { return s->status == RunStatus::Running; });
  reader_->start(
      [found, ids = ids_, stamps = stamps_, running](RunStore& store) {
        std::vector<int64_t> present;
        std::vector<std::string> now;
        for (size_t i = 0; i < ids.size(); ++i) {
          if (const std::optional<RunRecord> r = store.find_run(ids[i])) {
            present.push_back(ids[i]);
            now.push_back(stamp(*r));
          } else {
            found->gone.push_back(i);
          }
        }
        if (found->gone.empty() && now == stamps && !running) return;
        found->runs = read_runs(store, present);
      },
      [this, found, reading = ++reading_](const QString& error) {
        // Unreadable for now, or unchanged: the comparison stays as it was last read. Runs chosen or read meanwhile
        // were read on their own, later.
        if (!error.isEmpty() || reading != reading_ || (found->gone.empty() && found->runs.runs.empty())) return;
        for (size_t i : found->gone) dropped_ << QString::fromStdString(series_[i]->label);
        show_runs(std::move(found->runs));
      });
}

void CompareView::update_summary() {
  if (!seed_only_) {
    summary_->clear();
    summary_->setVisible(false);
    fit_speed_lines();
    return;
  }
  // The runs differ only by seed: the spread is the noise floor any other comparison must beat.
  double best_sum = 0, best_ss = 0;
  std::vector<double> best;
  for (const auto& s : series_) {
    double b = 0;
    for (const EpochReport& e : s->epochs) b = std::max(b, e.validation_accuracy);
    best.push_back(b);
    best_sum += b;
  }
  const double mean = best_sum / best.size();
  for (double b : best) best_ss += (b - mean) * (b - mean);
  const double std = std::sqrt(best_ss / (best.size() - 1));
  summary_->setText(tr("These %1 runs differ only by seed: best validation accuracy %2 ± %3% (mean ± std); the "
                       "charts show the validation curves as mean ± std bands.")
                        .arg(best.size())
                        .arg(QString::fromStdString(fixed_text(100 * mean, 2)))  // printf's rounding, as the CLI's
                        .arg(QString::fromStdString(fixed_text(100 * std, 2))));
  summary_->setVisible(true);
  fit_speed_lines();
}

void CompareView::fit_speed_lines() {
  // As high as its lines, up to four, and gone without any: the table under it takes the lines left unused.
  const bool any = !summary_->isHidden() || !time_->isHidden();
  // Its parent's width less the margins: the layout's own rectangle is empty from any change until laid out again.
  const QWidget* parent = speed_lines_->parentWidget();
  const QMargins margins = parent->layout()->contentsMargins();
  const int width = parent->width() - margins.left() - margins.right();
  const int most = 4 * time_->fontMetrics().lineSpacing() + 1;
  if (any) speed_lines_->setFixedHeight(std::min(speed_lines_->widget()->heightForWidth(std::max(1, width)) + 1, most));
  speed_lines_->setVisible(any);
}

void CompareView::resizeEvent(QResizeEvent* event) {
  QWidget::resizeEvent(event);
  // Once laid out at the new width, where the speed lines may wrap anew.
  if (event->oldSize().width() != width())
    QMetaObject::invokeMethod(this, &CompareView::fit_speed_lines, Qt::QueuedConnection);
}

}  // namespace ampwb::ui
