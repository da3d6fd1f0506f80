// SweepView: the sweep chooser, the points table, the groups table and the store polling.
#include "sweep_view.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QMessageBox>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QTableView>
#include <QTableWidget>
#include <QTimer>
#include <QToolBar>
#include <QVBoxLayout>
#include <algorithm>
#include <nlohmann/json.hpp>

#include "plain_text.h"
#include "run_groups.h"
#include "store_reader.h"
#include "sweep_points_model.h"
#include "workbench_store.h"

namespace ampwb::ui {
namespace {

QString sweep_title(const SweepRecord& s) {
  QString text = QObject::tr("Sweep %1").arg(s.id);
  if (!s.name.empty()) {
    text += QStringLiteral(" · ") + QString::fromStdString(s.name);
  } else {  // what it sweeps, as `ampwb sweeps` says it: "precision × seed"
    QStringList dimensions;
    const auto grid = nlohmann::ordered_json::parse(s.grid_json, nullptr, false);
    if (grid.is_object() && grid.contains("grid") && grid["grid"].is_object())
      for (const auto& [setting, values] : grid["grid"].items()) dimensions << QString::fromStdString(setting);
    if (!dimensions.isEmpty()) text += QStringLiteral(" · ") + dimensions.join(QStringLiteral(" × "));
  }
  text += s.runs_on == "slurm"
              ? (s.slurm_job_id.empty() ? QObject::tr(" · Slurm")
                                        : QObject::tr(" · Slurm %1").arg(QString::fromStdString(slurm_jobs_text(s))))
              : QObject::tr(" · this machine");
  if (s.cancelled) text += QObject::tr(" · cancelled");
  return text + QStringLiteral(" · ") + QString::fromStdString(s.created);
}

}  // namespace

SweepView::SweepView(RunStore& store, QWidget* parent, const std::string& location)
    : QWidget(parent), store_(store), reader_(new StoreReader(location.empty() ? store.path() : location, this)) {
  setObjectName("sweepView");
  confirm = [this](const QString& question) {  // plain text: it may name a Slurm job
    return plain_message(this, QMessageBox::Question, tr("Cancel the sweep"), question,
                         QMessageBox::Yes | QMessageBox::No, QMessageBox::No) == QMessageBox::Yes;
  };
  chooser_ = new QComboBox;
  chooser_->setObjectName("sweepChooser");
  chooser_->setSizeAdjustPolicy(QComboBox::AdjustToContents);
  connect(chooser_, &QComboBox::activated, this, [this](int i) {
    wanted_ = chooser_->itemData(i).toLongLong();
    reload();
  });
  counts_ = new QLabel;
  counts_->setObjectName("sweepCounts");
  counts_->setTextFormat(Qt::PlainText);  // a store's error may quote user text

  auto* bar = new QToolBar;
  bar->setToolButtonStyle(Qt::ToolButtonTextOnly);
  compare_ = bar->addAction(tr("Compare the finished points"), this, [this] {
    if (const std::vector<int64_t> ids = results().finished_runs(); !ids.empty()) Q_EMIT open_requested(ids);
  });
  cancel_ = bar->addAction(tr("Cancel the sweep…"), this, [this] {
    const SweepRecord& s = results().sweep;
    if (s.id == 0 || s.cancelled) return;
    if (timing_here()) {
      if (confirm(tr("Stop timing sweep %1? Its points have trained; the speed-ups being timed in alternation are not "
                     "recorded (ampwb sweep run %1 times them later).")
                      .arg(s.id)))
        Q_EMIT stop_timing_requested(s.id);
      return;
    }
    if (confirm(tr("Cancel sweep %1? No point starts any more, and the points not yet finished are marked "
                   "cancelled (a run training now stops after its current step, with a checkpoint)%2.")
                    .arg(s.id)
                    .arg(s.slurm_job_id.empty()
                             ? QString()
                             : tr(", and Slurm cancels %1 (scancel)").arg(QString::fromStdString(slurm_jobs_text(s))))))
      Q_EMIT cancel_requested(s.id);
  });
  bar->addAction(tr("Refresh"), this, &SweepView::reload);

  model_ = new SweepPointsModel(this);
  proxy_ = new QSortFilterProxyModel(this);
  proxy_->setSourceModel(model_);
  proxy_->setSortRole(SweepPointsModel::kSortRole);
  table_ = new QTableView;
  table_->setObjectName("sweepPoints");
  table_->setModel(proxy_);
  table_->setSortingEnabled(true);
  table_->sortByColumn(0, Qt::AscendingOrder);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setAlternatingRowColors(true);
  table_->setWordWrap(false);
  table_->verticalHeader()->hide();
  table_->horizontalHeader()->setStretchLastSection(true);
  connect(table_, &QTableView::doubleClicked, this, [this](const QModelIndex& index) {
    const int64_t run = proxy_->data(index, SweepPointsModel::kRunRole).toLongLong();
    if (run != 0) Q_EMIT open_requested({run});
  });

  groups_title_ = new QLabel;
  groups_title_->setObjectName("sweepGroupsTitle");
  groups_title_->setTextFormat(Qt::PlainText);  // as every label here: never read as HTML
  groups_title_->setWordWrap(true);
  groups_ = new QTableWidget(0, 6);
  groups_->setObjectName("sweepGroups");
  // The speed-up timed in alternation before the trainings' own images/s, which other work may have moved.
  // Headers on two lines, and the speed-up's sentence wrapped: every column in view at 1366×768, none scrolled to.
  groups_->setHorizontalHeaderLabels({tr("group"), tr("runs"), tr("final val. acc. (%)"), tr("final val. loss"),
                                      tr("speed-up,\ntimed in alternation"), tr("training images/s\n(steady state)")});
  groups_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  groups_->setSelectionBehavior(QAbstractItemView::SelectRows);
  groups_->verticalHeader()->hide();
  groups_->horizontalHeader()->setStretchLastSection(true);
  connect(groups_, &QTableWidget::cellDoubleClicked, this, [this](int row, int) {
    if (row >= 0 && static_cast<size_t>(row) < results().groups.size())
      Q_EMIT open_requested(results().groups[static_cast<size_t>(row)].run_ids);
  });
  auto* bottom = new QWidget;
  auto* bl = new QVBoxLayout(bottom);
  bl->setContentsMargins(0, 4, 0, 0);
  bl->addWidget(groups_title_);
  bl->addWidget(groups_, 1);

  auto* splitter = new QSplitter(Qt::Vertical);
  splitter->addWidget(table_);
  splitter->addWidget(bottom);
  splitter->setStretchFactor(0, 3);
  splitter->setStretchFactor(1, 2);

  auto* top = new QHBoxLayout;
  top->addWidget(chooser_);
  top->addWidget(counts_, 1);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addLayout(top);
  layout->addWidget(bar);
  layout->addWidget(splitter, 1);

  poll_ = new QTimer(this);
  poll_->setInterval(kPollIntervalMs);
  connect(poll_, &QTimer::timeout, this, &SweepView::follow);
  update_actions();
}

const SweepResults& SweepView::results() const { return model_->results(); }

int64_t SweepView::current_sweep() const { return results().sweep.id; }

void SweepView::show_sweep(int64_t id) {
  wanted_ = id;
  reload();
}

SweepView::Reading SweepView::read(const RunStore& store, int64_t wanted) {
  Reading r;
  r.sweeps = sweeps(store);
  int64_t id = 0;
  for (const SweepRecord& s : r.sweeps)
    if (s.id == wanted) id = s.id;
  if (id == 0 && !r.sweeps.empty()) id = r.sweeps.back().id;  // the newest, until one is chosen
  if (id != 0) r.results = read_sweep_results(store, id);
  return r;
}

void SweepView::reload() {
  ++reading_;  // a follow() read begun before is older than this one
  try {
    show_reading(read(store_, wanted_));
  } catch (const std::exception& e) {  // a store busy or out of reach: the last reading stays, the next may do
    show_trouble(QString::fromUtf8(e.what()));
  }
}

void SweepView::follow() {
  // Read on the reader's thread: a server out of reach must not hold the window. One read at a time.
  if (reader_->busy()) return;
  auto found = std::make_shared<Reading>();
  reader_->start([found, wanted = wanted_](RunStore& store) { *found = read(store, wanted); },
                 [this, found, reading = ++reading_](const QString& error) {
                   if (reading != reading_) return;  // read again since, or another sweep chosen
                   if (!error.isEmpty())
                     show_trouble(error);
                   else
                     show_reading(*found);
                 });
}

void SweepView::show_trouble(const QString& error) {
  counts_->setText(tr("The run store cannot be read now: these are the sweeps as last read."));
  counts_->setToolTip(plain_tooltip(store_trouble(error)));
}

void SweepView::show_reading(const Reading& reading) {
  const std::vector<SweepRecord>& list = reading.sweeps;
  const SweepResults& results = reading.results;
  {
    const QSignalBlocker block(chooser_);
    chooser_->clear();
    for (auto s = list.rbegin(); s != list.rend(); ++s)
      chooser_->addItem(sweep_title(*s), QVariant::fromValue<qlonglong>(s->id));
    chooser_->setCurrentIndex(chooser_->findData(QVariant::fromValue<qlonglong>(results.sweep.id)));
    chooser_->setVisible(!list.empty());  // an empty choice says nothing the line beside it does not
  }
  const bool other_points =
      results.sweep.id != current_sweep() || static_cast<int>(results.points.size()) != model_->rowCount();
  model_->set_results(results);
  widths_.follow(*table_, other_points);
  counts_->setToolTip(QString());
  QString counts = list.empty() ? tr("No sweeps in this store yet: Run ▸ Sweep… or `ampwb sweep` starts one.")
                                : QString::fromStdString(sweep_counts_text(results));
  if (timing_here()) counts += tr("; timing its configurations in alternation, %1…").arg(timing_progress_);
  counts_->setText(counts);
  update_groups();
  update_actions();
}

void SweepView::set_running_here(int64_t sweep_id, const QString& timing_progress) {
  running_here_ = sweep_id;
  timing_progress_ = timing_progress;
  if (isVisible()) follow();  // read off the window's thread; hidden, showEvent reads it
}

bool SweepView::timing_here() const {
  const SweepResults& r = results();
  return r.sweep.id != 0 && r.sweep.id == running_here_ && !timing_progress_.isEmpty() && !r.sweep.cancelled;
}

void SweepView::update_actions() {
  const SweepResults& r = results();
  const bool finished = !r.finished_runs().empty();  // Compare waits for a point to finish, saying so
  compare_->setEnabled(finished);
  compare_->setToolTip(finished ? QString() : tr("No point of this sweep has finished yet"));
  if (timing_here()) {  // its points ended, but the process goes on timing them: Cancel stops that
    cancel_->setEnabled(true);
    cancel_->setToolTip(
        plain_tooltip(tr("Stop timing sweep %1 in alternation: its speed-ups are not recorded").arg(r.sweep.id)));
    return;
  }
  const bool ended =
      std::all_of(r.points.begin(), r.points.end(), [](const SweepPointResult& p) { return is_final(p.point.state); });
  QString why;
  if (r.sweep.id == 0)
    why = tr("No sweep to cancel");
  else if (r.sweep.cancelled)
    why = tr("Sweep %1 is cancelled already").arg(r.sweep.id);
  else if (ended)
    why =
        tr("Nothing left to cancel: every point of sweep %1 has ended (finished, failed or cancelled)").arg(r.sweep.id);
  else if (store_.read_only())
    why = tr("Sweep %1 cannot be cancelled from here: %2").arg(r.sweep.id).arg(read_only_reason(store_));
  cancel_->setEnabled(why.isEmpty());
  cancel_->setToolTip(plain_tooltip(
      why.isEmpty()
          ? tr("Cancel sweep %1: no point starts any more%2")
                .arg(r.sweep.id)
                .arg(r.sweep.slurm_job_id.empty() ? QString() : tr(", and its Slurm job is cancelled (scancel)"))
          : why));
}

namespace {
constexpr int kSpeedUpColumn = 4;  // of the groups table
}  // namespace

void SweepView::update_groups() {
  const std::vector<SweepGroupResult>& groups = results().groups;
  QString title = tr("Finished points grouped by every varying setting but the seed: mean ± std over their seeds");
  if (const std::string& busy = results().timing_warning; !busy.empty())
    title += tr("\n⚠ Timings unreliable: %1; time them again on a quiet machine with ampwb sweep run %2")
                 .arg(QString::fromStdString(busy))
                 .arg(results().sweep.id);
  groups_title_->setText(title);
  groups_->setRowCount(static_cast<int>(groups.size()));
  // "not timed" reads as final: while this window's process trains or times the sweep, its speed-ups are to come.
  const QString not_timed = timing_here() ? tr("timing, %1…").arg(timing_progress_)
                            : results().sweep.id == running_here_ && running_here_ ? tr("not timed yet")
                                                                                   : tr("not timed");
  for (int row = 0; row < groups_->rowCount(); ++row) {
    const SweepGroupResult& g = groups[static_cast<size_t>(row)];
    const QString cells[] = {QString::fromStdString(g.value),
                             QString::number(g.run_ids.size()),
                             QString::fromStdString(mean_std_text(g.final_accuracy, 2)),
                             QString::fromStdString(mean_std_text(g.final_loss, 4)),
                             g.speed_up.empty() ? not_timed : QString::fromStdString(g.speed_up),
                             QString::fromStdString(mean_std_text(g.images_per_second, 0))};
    for (int column = 0; column < 6; ++column) {
      auto* item = new QTableWidgetItem(cells[column]);
      if (column > 0) item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
      if (column == kSpeedUpColumn) item->setToolTip(cells[column]);
      groups_->setItem(row, column, item);
    }
  }
  groups_->resizeColumnsToContents();
  // "0.99× (97% interval 0.39–9.45): not distinguishable from 1.0×" on two lines rather than one that pushes the
  // images/s out of view.
  const int speed_up_width = groups_->fontMetrics().horizontalAdvance(QString(34, 'x'));
  if (groups_->columnWidth(kSpeedUpColumn) > speed_up_width) groups_->setColumnWidth(kSpeedUpColumn, speed_up_width);
  groups_->resizeRowsToContents();
}

void SweepView::showEvent(QShowEvent* event) {
  QWidget::showEvent(event);
  follow();
  poll_->start();
}

void SweepView::hideEvent(QHideEvent* event) {
  QWidget::hideEvent(event);
  poll_->stop();
}

}  // namespace ampwb::ui
