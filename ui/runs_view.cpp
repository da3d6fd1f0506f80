// RunsView: the table, its filter, toolbar and context menu, and the store edits.
#include "runs_view.h"

#include <QClipboard>
#include <QFileDialog>
#include <QGuiApplication>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QInputDialog>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPointer>
#include <QShortcut>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QTextCursor>
#include <QTimer>
#include <QToolBar>
#include <QToolButton>
#include <QVBoxLayout>
#include <filesystem>
#include <set>

#include "export_model_dialog.h"
#include "file_dialogs.h"
#include "flow_layout.h"
#include "plain_text.h"
#include "predict_dialog.h"
#include "runs_poller.h"
#include "store/final_weights.h"
#include "workbench_store.h"

namespace ampwb::ui {
namespace {

template <class F>
QString attempt(F&& f) {
  try {
    f();
    return {};
  } catch (const std::exception& e) {
    return QString::fromUtf8(e.what());
  }
}

// final_weights_refusal, with a store that cannot be read as the reason.
std::string attempt_refusal(const RunStore& store, int64_t run) {
  try {
    return final_weights_refusal(store, run);
  } catch (const std::exception& e) {
    return e.what();
  }
}

// Why Predict and Export model cannot use a run's final weights, from its row as last read.
std::string weights_refusal(const RunsModel::Row& row) { return final_weights_refusal(row.record); }

}  // namespace

RunsView::RunsView(RunStore& store, QWidget* parent, const std::string& location) : QWidget(parent), store_(store) {
  setObjectName("runsView");
  confirm = [this](const QString& question) {  // plain text: it lists the runs' names
    return plain_message(this, QMessageBox::Question, tr("Delete"), question, QMessageBox::Yes | QMessageBox::Cancel,
                         QMessageBox::Cancel) == QMessageBox::Yes;
  };
  choose_image_folder = [this] {
    QFileDialog* dialog = new_file_dialog(this, tr("Folder of images to predict"), QString());
    dialog->setFileMode(QFileDialog::Directory);
    dialog->setOption(QFileDialog::ShowDirsOnly);
    const QStringList chosen = dialog->exec() == QDialog::Accepted ? dialog->selectedFiles() : QStringList();
    delete dialog;
    return chosen.isEmpty() ? QString() : chosen.front();
  };
  choose_images = [this] {
    QFileDialog* dialog = new_file_dialog(this, tr("Images to predict"), QString());
    dialog->setFileMode(QFileDialog::ExistingFiles);
    dialog->setNameFilter(tr("Images (*.png *.jpg *.jpeg *.bmp *.tif *.tiff *.webp *.ppm *.pgm)"));
    const QStringList files = dialog->exec() == QDialog::Accepted ? dialog->selectedFiles() : QStringList();
    delete dialog;
    return files;
  };
  model_ = new RunsModel(this);
  proxy_ = new QSortFilterProxyModel(this);
  proxy_->setSourceModel(model_);
  proxy_->setSortRole(RunsModel::kSortRole);
  proxy_->setFilterKeyColumn(-1);  // every column
  proxy_->setFilterRole(RunsModel::kFilterRole);
  proxy_->setFilterCaseSensitivity(Qt::CaseInsensitive);

  filter_ = new QLineEdit;
  filter_->setObjectName("runsFilter");
  filter_->setPlaceholderText(tr("Filter: name, dataset, precision, status, tag, notes…"));
  filter_->setClearButtonEnabled(true);
  connect(filter_, &QLineEdit::textChanged, this, [this](const QString& text) {
    proxy_->setFilterFixedString(text);
    update_count();
  });
  count_ = new QLabel;
  count_->setObjectName("runsCount");
  count_->setTextFormat(Qt::PlainText);  // a store's error may quote user text

  auto* bar = new QToolBar;
  bar->setToolButtonStyle(Qt::ToolButtonTextOnly);
  // Each action on the selected runs, enabled while the selection suits it: its tooltip says what to select else.
  const auto on_selection = [this](QAction* action, const char* name, Selected needs, bool writes, QString what,
                                   std::function<std::string(const RunsModel::Row&)> refusal = {}) {
    action->setObjectName(name);
    selection_actions_.push_back({action, needs, writes, std::move(what), std::move(refusal)});
  };
  on_selection(bar->addAction(tr("Open / compare"), this,
                              [this] {
                                if (!selected_ids().empty()) Q_EMIT open_requested(selected_ids());
                              }),
               "openAction", Selected::Some, false, tr("Open the run's charts, or compare the runs selected"));
  on_selection(bar->addAction(tr("Resume"), this,
                              [this] {
                                const auto ids = selected_ids();
                                if (ids.size() == 1) Q_EMIT resume_requested(ids[0]);
                              }),
               "resumeAction", Selected::One, true, tr("Resume the run from its last checkpoint"),
               [](const RunsModel::Row& row) { return row.resume_refusal; });
  bar->addSeparator();
  QAction* rename_run = bar->addAction(tr("Rename…"), this, &RunsView::rename_selected);
  on_selection(rename_run, "renameAction", Selected::One, true, tr("Rename the run"));
  rename_run->setShortcut(Qt::Key_F2);  // as a file manager renames, while the view has the focus
  rename_run->setShortcutContext(Qt::WidgetWithChildrenShortcut);
  addAction(rename_run);
  on_selection(bar->addAction(tr("Tag…"), this, &RunsView::tag_selected), "tagAction", Selected::Some, true,
               tr("Tag the runs selected, or untag them"));
  // Read-only, notes are shown all the same.
  on_selection(bar->addAction(tr("Notes…"), this, &RunsView::notes_selected), "notesAction", Selected::One, false,
               tr("The run's notes"));
  QAction* remove_runs = bar->addAction(tr("Delete…"), this, &RunsView::delete_selected);
  on_selection(remove_runs, "deleteAction", Selected::Some, true,
               tr("Delete the runs selected and their final weights"));
  remove_runs->setShortcut(QKeySequence::Delete);  // while the view has the focus (the filter keeps its own Delete)
  remove_runs->setShortcutContext(Qt::WidgetWithChildrenShortcut);
  addAction(remove_runs);
  // What leaves the view, in a bar of its own that wraps under the first where the view is narrow.
  auto* outputs = new QToolBar;
  outputs->setToolButtonStyle(Qt::ToolButtonTextOnly);
  on_selection(outputs->addAction(tr("Export CSV…"), this,
                                  [this] {
                                    if (!selected_ids().empty()) Q_EMIT export_csv_requested(selected_ids());
                                  }),
               "exportCsvAction", Selected::Some, false, tr("The runs' epochs and steps as CSV files"));
  on_selection(outputs->addAction(tr("Export charts…"), this,
                                  [this] {
                                    if (!selected_ids().empty()) Q_EMIT export_charts_requested(selected_ids());
                                  }),
               "exportChartsAction", Selected::Some, false, tr("The runs' charts as PNG, SVG or PDF files"));
  QAction* predict = outputs->addAction(tr("Predict…"), this, &RunsView::predict_selected);
  on_selection(predict, "predictAction", Selected::One, false,
               tr("Classify images with the run's final weights (the arrow: a whole folder of them)"), weights_refusal);
  auto* predict_choices = new QMenu(this);
  predict_choices->addAction(tr("Predict on images…"), this, &RunsView::predict_selected);
  predict_choices->addAction(tr("Predict on a folder of images…"), this, &RunsView::predict_folder_selected);
  predict->setMenu(predict_choices);
  if (auto* button = qobject_cast<QToolButton*>(outputs->widgetForAction(predict)))
    button->setPopupMode(QToolButton::MenuButtonPopup);
  export_model_action_ = outputs->addAction(tr("Export model…"), this, &RunsView::export_model_selected);
  on_selection(export_model_action_, "exportModelAction", Selected::One, false,
               tr("The run's final weights as an ONNX or safetensors file"), weights_refusal);
  outputs->addSeparator();
  outputs->addAction(tr("Refresh"), this, &RunsView::reload);

  table_ = new QTableView;
  table_->setObjectName("runsTable");
  table_->setModel(proxy_);
  table_->setSortingEnabled(true);
  table_->sortByColumn(RunsModel::Date, Qt::DescendingOrder);  // newest first
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::ExtendedSelection);
  table_->setAlternatingRowColors(true);
  table_->setTabKeyNavigation(false);  // Tab leaves the table for the next control, not the next cell
  table_->verticalHeader()->hide();
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Interactive);
  table_->setContextMenuPolicy(Qt::CustomContextMenu);
  connect(table_, &QTableView::customContextMenuRequested, this, &RunsView::show_menu);
  connect(table_->selectionModel(), &QItemSelectionModel::selectionChanged, this, &RunsView::update_actions);
  connect(table_, &QTableView::doubleClicked, this, [this](const QModelIndex& index) {
    Q_EMIT open_requested({proxy_->data(index, RunsModel::kIdRole).toLongLong()});
  });
  for (const QKeySequence& key : {QKeySequence(Qt::Key_Return), QKeySequence(Qt::Key_Enter)}) {  // Enter opens too
    auto* open = new QShortcut(key, table_, nullptr, nullptr, Qt::WidgetShortcut);
    connect(open, &QShortcut::activated, this, [this] {
      if (!selected_ids().empty()) Q_EMIT open_requested(selected_ids());
    });
  }

  auto* top = new QHBoxLayout;
  top->addWidget(filter_, 1);
  top->addWidget(count_);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addLayout(top);
  auto* bars = new FlowLayout(nullptr, 0, 0);
  bars->addWidget(bar);
  bars->addWidget(outputs);
  layout->addLayout(bars);
  layout->addWidget(table_, 1);
  // From the keyboard alone: Tab goes from the filter through the actions' buttons (which take no focus in a tool bar
  // by default) to the table.
  QWidget* previous = filter_;
  for (QToolBar* b : {bar, outputs})
    for (QAction* a : b->actions())
      if (QWidget* button = b->widgetForAction(a); button && !a->isSeparator()) {
        button->setFocusPolicy(Qt::TabFocus);
        setTabOrder(previous, button);
        previous = button;
      }
  setTabOrder(previous, table_);
  update_actions();

  poller_ = new RunsPoller(location.empty() ? store_.path() : location, this);
  poller_->on_changed = [this](std::vector<RunsModel::Row> rows) { apply_polled(std::move(rows)); };
  poller_->on_unchanged = [this] {
    if (!poll_error_.isEmpty()) {  // the store is back: so are the actions its error disabled
      poll_error_.clear();
      update_count();
      update_actions();
    }
  };
  poller_->on_failed = [this](const QString& error) {  // the last reading stays; the next poll may do
    poll_error_ = error;
    update_count();
  };
  poll_timer_ = new QTimer(this);
  poll_timer_->setInterval(kPollIntervalMs);
  connect(poll_timer_, &QTimer::timeout, this, &RunsView::poll);
}

RunsView::~RunsView() = default;

void RunsView::poll() { poller_->poll(); }

void RunsView::apply_polled(std::vector<RunsModel::Row> rows) {
  const bool store_was_out_of_reach = !std::exchange(poll_error_, QString()).isEmpty();
  const std::vector<int64_t> selected = selected_ids();
  std::vector<std::string> before;  // the selected runs as shown, to tell whether their actions may have changed
  for (int64_t id : selected) before.push_back(model_->record(model_->row_of(id)).updated);
  // Rows are updated in place, so the selection, the sort and the scroll position stay (a new or removed run moves
  // only the rows below it), and so do the column widths the user chose: a column widens only when what it shows
  // grew too wide for it (a new run's name wrapped in two lines otherwise), and never narrows.
  const bool was_empty = model_->rowCount() == 0;
  model_->set_rows(std::move(rows));
  widths_.follow(*table_, was_empty && model_->rowCount() > 0);
  update_count();
  bool selected_changed = false;
  for (size_t i = 0; i < selected.size(); ++i) {
    const int row = model_->row_of(selected[i]);
    selected_changed |= row < 0 || model_->record(row).updated != before[i];
  }
  if (selected_changed || store_was_out_of_reach) update_actions();
}

void RunsView::showEvent(QShowEvent* event) {
  QWidget::showEvent(event);
  poll();
  poll_timer_->start();
}

void RunsView::hideEvent(QHideEvent* event) {
  QWidget::hideEvent(event);
  poll_timer_->stop();
}

void RunsView::reload() {
  const std::vector<int64_t> selected = selected_ids();
  const bool was_empty = model_->rowCount() == 0;
  const QString error = attempt([&] {
    store_.recover_abandoned_runs();
    model_->reload(store_);
  });
  if (!error.isEmpty()) Q_EMIT status_message(store_trouble(error));
  widths_.follow(*table_, was_empty);
  select(selected);
  update_count();
  update_actions();
}

void RunsView::update_count() {
  QString text = tr("%1 of %2 runs").arg(proxy_->rowCount()).arg(model_->rowCount());
  // What it means here, the store's error whole in the tooltip: the label must not widen the window.
  if (!poll_error_.isEmpty()) text += " · " + tr("the run store cannot be read now: these are the runs as last read");
  count_->setText(text);
  count_->setToolTip(poll_error_.isEmpty() ? QString() : plain_tooltip(store_trouble(poll_error_)));
}

std::vector<int64_t> RunsView::selected_ids() const {
  std::vector<int64_t> ids;
  for (const QModelIndex& index : table_->selectionModel()->selectedRows())
    ids.push_back(proxy_->data(index, RunsModel::kIdRole).toLongLong());
  std::sort(ids.begin(), ids.end());
  return ids;
}

void RunsView::select(const std::vector<int64_t>& ids) {
  table_->clearSelection();
  for (int64_t id : ids) {
    const int row = model_->row_of(id);
    if (row < 0) continue;
    const QModelIndex index = proxy_->mapFromSource(model_->index(row, 0));
    table_->selectionModel()->select(index, QItemSelectionModel::Select | QItemSelectionModel::Rows);
  }
}

void RunsView::set_filter(const QString& text) { filter_->setText(text); }

QString RunsView::rename(int64_t id, const QString& name) {
  const QString e = attempt([&] { store_.rename(id, name.trimmed().toStdString()); });
  reload();
  return e;
}

QString RunsView::add_tag(int64_t id, const QString& tag) {
  const QString e = attempt([&] { store_.add_tag(id, tag.trimmed().toStdString()); });
  reload();
  return e;
}

QString RunsView::remove_tag(int64_t id, const QString& tag) {
  const QString e = attempt([&] { store_.remove_tag(id, tag.trimmed().toStdString()); });
  reload();
  return e;
}

QString RunsView::set_notes(int64_t id, const QString& notes) {
  const QString e = attempt([&] { store_.set_notes(id, notes.toStdString()); });
  reload();
  return e;
}

QString RunsView::remove(int64_t id) {
  const QString e = attempt([&] { store_.remove(id); });
  reload();
  return e;
}

// Asks for a run's name or notes and writes them where nobody changed them meanwhile. Where somebody did, the message
// shows theirs and the dialog comes back with the user's text to merge, so that nothing is lost.
void RunsView::edit_text(int64_t id, std::string RunRecord::*field, const QString& title,
                         const std::function<QString(const QString& shown, bool& ok)>& ask,
                         const std::function<void(const QString& text, const std::string& were)>& write) {
  const int row = model_->row_of(id);
  if (row < 0) return;
  std::string were = model_->record(row).*field;
  QString text = QString::fromStdString(were);
  for (;;) {
    bool ok = false;
    text = ask(text, ok);
    if (!ok) return;
    std::optional<std::string> theirs;  // what the run holds now, where another window or process changed it
    bool refused_as_typed = false;      // the text itself refused (a name taken, a name like an id), not the store
    const QString error = attempt([&] {
      try {
        write(text, were);
      } catch (const EditConflict& conflict) {
        theirs = conflict.current();
        throw;
      } catch (const StoreError&) {
        throw;
      } catch (const Error&) {
        refused_as_typed = true;
        throw;
      }
    });
    reload();
    if (error.isEmpty()) return;
    const QString said = as_sentence(error);
    const bool typed = text != QString::fromStdString(were);
    if (refused_as_typed && typed) {  // the user's to change
      plain_message(this, QMessageBox::Warning, title, said + tr("\n\nYours follows in the dialog, to change."));
      continue;
    }
    if (!theirs) {  // refused (the run deleted meanwhile): what the user typed goes to the clipboard
      if (typed) QGuiApplication::clipboard()->setText(text);
      plain_message(this, QMessageBox::Warning, title,
                    typed ? said + tr("\n\nWhat you typed was not saved: it is on the clipboard.") : said);
      return;
    }
    // Notes come back with theirs above the user's, both to merge; a name is one line, the user's to keep or change.
    const QString current = QString::fromStdString(*theirs);
    const bool merged = field == &RunRecord::notes && !current.isEmpty() && !text.contains(current);
    if (merged) text = current + "\n\n" + text;
    plain_message(this, QMessageBox::Warning, title,
                  said + (merged ? tr("\n\nTheirs and yours, below theirs, follow in the dialog, to merge and save "
                                      "again.")
                                 : tr("\n\nYours follows in the dialog, to save again or change.")));
    were = *theirs;
  }
}

void RunsView::rename_selected() {
  const auto ids = selected_ids();
  if (ids.size() != 1) return;
  const int64_t id = ids[0];
  edit_text(
      id, &RunRecord::name, tr("Rename"),
      [&](const QString& shown, bool& ok) {
        return QInputDialog::getText(this, tr("Rename run %1").arg(id), tr("Name"), QLineEdit::Normal, shown, &ok);
      },
      [&](const QString& text, const std::string& were) { store_.rename(id, text.trimmed().toStdString(), were); });
}

void RunsView::tag_selected() {
  const auto ids = selected_ids();
  if (ids.empty()) return;
  // As Rename does: a tag refused as typed brings the dialog back with the user's text, to change, not lost.
  QString typed;
  for (;;) {
    bool ok = false;
    typed = QInputDialog::getText(this, tr("Tag"),
                                  ids.size() == 1
                                      ? tr("Tag to add (prefix with - to remove it) to 1 run")
                                      : tr("Tag to add (prefix with - to remove it) to %1 runs").arg(ids.size()),
                                  QLineEdit::Normal, typed, &ok);
    const QString t = typed.trimmed();
    if (!ok || t.isEmpty()) return;
    const bool removing = t.startsWith('-');
    const QString tag = removing ? t.mid(1).trimmed() : t;
    // Checked before any run is tagged, so that a tag refused leaves every run as it was: a tag the store would
    // refuse, or one to remove that none of the runs has. Untagging skips the runs without it.
    std::vector<int64_t> targets;
    QString refused;
    if (removing) {
      for (int64_t id : ids) {
        try {
          const std::vector<std::string> tags = store_.run(id).tags;
          if (std::find(tags.begin(), tags.end(), tag.toStdString()) == tags.end()) continue;
        } catch (const std::exception&) {  // the untag itself says what the store could not do
        }
        targets.push_back(id);
      }
      if (targets.empty())
        refused = ids.size() == 1 ? tr("Run %1 has no tag '%2'").arg(ids[0]).arg(tag)
                                  : tr("None of these %1 runs has the tag '%2'").arg(ids.size()).arg(tag);
    } else {
      targets = ids;
      refused = as_sentence(QString::fromStdString(tag_problem(tag.toStdString())));
    }
    if (!refused.isEmpty()) {
      plain_message(this, QMessageBox::Warning, tr("Tag"), refused + tr("\n\nYours follows in the dialog, to change."));
      continue;
    }
    for (int64_t id : targets) {
      const QString error = removing ? remove_tag(id, tag) : add_tag(id, tag);
      if (!error.isEmpty()) {
        plain_message(this, QMessageBox::Warning, tr("Tag"), as_sentence(error));
        return;
      }
    }
    return;
  }
}

void RunsView::notes_selected() {
  const auto ids = selected_ids();
  if (ids.size() != 1) return;
  const int64_t id = ids[0];
  const bool writable = !store_.read_only();
  const auto ask = [&](const QString& shown, bool& ok) {
    // Notes run to paragraphs: Qt's multi-line dialog is a narrow box that scrolls each line sideways. On the
    // heap, watched: a window closed during exec() deletes it with its children.
    const QPointer<QInputDialog> dialog = new QInputDialog(this);
    dialog->setWindowTitle(writable ? tr("Notes on run %1").arg(id) : tr("Notes on run %1 (read-only)").arg(id));
    dialog->setLabelText(writable ? tr("Notes") : tr("Notes (shown only: the run store is read-only here)"));
    dialog->setOption(QInputDialog::UsePlainTextEditForTextInput);
    dialog->setTextValue(shown);
    if (auto* edit = dialog->findChild<QPlainTextEdit*>()) {
      edit->setLineWrapMode(QPlainTextEdit::WidgetWidth);
      edit->setReadOnly(!writable);
      // Qt's dialog selects the text as it shows: the first key pressed would replace the notes. The cursor goes
      // after them instead, once the dialog is shown.
      QTimer::singleShot(0, edit, [edit] { edit->moveCursor(QTextCursor::End); });
    }
    dialog->resize(600, 380);
    ok = dialog->exec() == QDialog::Accepted && dialog;
    const QString text = dialog ? dialog->textValue() : shown;
    delete dialog.data();
    return text;
  };
  if (!writable) {  // the notes shown, nothing to save
    const int row = model_->row_of(id);
    bool ok = false;
    if (row >= 0) ask(QString::fromStdString(model_->record(row).notes), ok);
    return;
  }
  edit_text(id, &RunRecord::notes, tr("Notes"), ask,
            [&](const QString& text, const std::string& were) { store_.set_notes(id, text.toStdString(), were); });
}

void RunsView::delete_selected() {
  const auto ids = selected_ids();
  if (ids.empty()) return;
  const auto name_of = [this](int64_t id) {
    const int row = model_->row_of(id);
    return QStringLiteral("%1 (%2)").arg(id).arg(row < 0 ? QString()
                                                         : QString::fromStdString(model_->record(row).name));
  };
  // The runs still training are found before asking, not after a yes: the store refuses to delete them from under
  // their process.
  std::vector<int64_t> deleting;
  QStringList training, training_ids;  // each run left, with the process that trains it; their ids
  std::string store_refusal;           // the store's own words, said whole where one run alone is refused
  for (int64_t id : ids) {
    std::string refusal;
    RunRecord record;
    try {
      record = store_.run(id);
      refusal = store_.removal_refusal(record);
    } catch (const std::exception&) {  // the delete itself says what the store could not do
    }
    if (refusal.empty()) {
      deleting.push_back(id);
      continue;
    }
    store_refusal = refusal;
    training_ids << QString::number(id);
    training << tr("%1: process %2 on %3")
                    .arg(name_of(id), QString::number(record.pid), QString::fromStdString(record.host));
  }
  if (deleting.empty()) {
    plain_message(
        this, QMessageBox::Warning, tr("Delete"),
        training.size() == 1
            ? as_sentence(QString::fromStdString(store_refusal))
            : tr("None of these runs can be deleted now: they are still training.\n\n%1\n\nStop them first, with "
                 "Stop in the window that trains each or Ctrl-C where ampwb train runs.")
                  .arg(training.join("\n")));
    return;
  }
  QStringList names;
  for (int64_t id : deleting) names << name_of(id);
  bool weights = false;  // this store's own to remove: a file another store may name stays (final_weights.h)
  for (int64_t id : deleting)
    if (const int row = model_->row_of(id); row >= 0) weights |= owns_final_weights(store_.path(), model_->record(row));
  QString question =
      deleting.size() == 1
          ? (weights ? tr("Delete this run, everything recorded about it and its final weights?\n\n%1")
                     : tr("Delete this run and everything recorded about it?\n\n%1"))
          : (weights ? tr("Delete these %1 runs, everything recorded about them and their final weights?\n\n%2")
                     : tr("Delete these %1 runs and everything recorded about them?\n\n%2"))
                .arg(deleting.size());
  question = question.arg(names.join("\n"));
  if (!training.isEmpty())
    question +=
        training.size() == 1
            ? tr("\n\nThis run stays, as it is still training (stop it first to delete it):\n%1").arg(training.front())
            : tr("\n\nThese %1 runs stay, as they are still training (stop them first to delete them):\n%2")
                  .arg(training.size())
                  .arg(training.join("\n"));
  // The checkpoint files still on disk stay there (a store's copy or a sweep point may share them): said where
  // there are some, with how many. A run records its file once an epoch, mostly the same file: each counts once.
  std::set<std::string> checkpoint_files;
  for (int64_t id : deleting) {
    try {
      for (const CheckpointInfo& c : store_.checkpoints(id))
        for (const std::string& file : {c.path, c.path + ".prev"}) {  // the one before it is kept beside it
          std::error_code ec;
          if (std::filesystem::exists(file, ec)) checkpoint_files.insert(file);
        }
    } catch (const std::exception&) {  // the delete itself says what the store could not do
    }
  }
  if (!checkpoint_files.empty())
    question += checkpoint_files.size() == 1
                    ? tr("\n\n1 checkpoint file stays on disk, though nothing resumes from it once its run is "
                         "deleted.")
                    : tr("\n\n%1 checkpoint files stay on disk, though nothing resumes from them once their runs "
                         "are deleted.")
                          .arg(checkpoint_files.size());
  if (!confirm(question)) return;
  QStringList deleted, errors;
  for (int64_t id : deleting) {
    const QString error = remove(id);
    if (error.isEmpty())
      deleted << QString::number(id);
    else
      errors << as_sentence(error);
  }
  // What was deleted and what was not, every run selected accounted for.
  QString said = deleted.isEmpty()     ? tr("Nothing deleted")
                 : deleted.size() == 1 ? tr("Deleted run %1").arg(deleted.front())
                                       : tr("Deleted %1 runs (%2)").arg(deleted.size()).arg(deleted.join(", "));
  if (!training.isEmpty())
    said += training.size() == 1 ? tr("; run %1 stays: it is still training").arg(training_ids.front())
                                 : tr("; runs %1 stay: they are still training").arg(training_ids.join(", "));
  if (!errors.isEmpty()) {
    said += errors.size() == 1 ? tr("; 1 run could not be deleted")
                               : tr("; %1 runs could not be deleted").arg(errors.size());
    plain_message(this, QMessageBox::Warning, tr("Delete"), said + ".\n\n" + errors.join("\n\n"));
  }
  Q_EMIT status_message(said);
}

void RunsView::predict_selected() {
  predict_with([this] { return choose_images(); });
}

void RunsView::predict_folder_selected() {
  predict_with([this] {
    const QString folder = choose_image_folder();
    return folder.isEmpty() ? QStringList() : QStringList{folder};
  });
}

void RunsView::predict_with(const std::function<QStringList()>& choose) {
  const auto ids = selected_ids();
  if (ids.size() != 1) return;
  const std::string refusal = final_weights_refusal(store_, ids[0]);
  if (!refusal.empty()) {
    plain_message(this, QMessageBox::Information, tr("Predict"), as_sentence(QString::fromStdString(refusal)));
    return;
  }
  const QStringList images = choose();
  if (images.isEmpty()) return;
  auto* dialog = new PredictDialog(store_, ids[0], images, this);
  dialog->setAttribute(Qt::WA_DeleteOnClose);
  dialog->show();
}

void RunsView::update_actions() {
  const auto ids = selected_ids();
  // What writes into the store is refused up front in one this user may only read, saying why where the pointer is.
  const QString read_only = as_sentence(read_only_reason(store_));  // a tooltip of its own
  for (const SelectionAction& a : selection_actions_) {
    QString why = a.writes && !read_only.isEmpty()             ? read_only
                  : ids.empty()                                ? tr("Select a run first")
                  : a.needs == Selected::One && ids.size() > 1 ? tr("Select only one run for this")
                                                               : QString();
    const int row = ids.size() == 1 ? model_->row_of(ids[0]) : -1;
    QString name;  // kept whole where the reason names the run
    if (why.isEmpty() && a.refusal && row >= 0) {
      const RunsModel::Row& r = model_->rows()[static_cast<size_t>(row)];
      why = as_sentence(QString::fromStdString(a.refusal(r)));
      name = QString::fromStdString(r.record.name);
    }
    a.action->setEnabled(why.isEmpty());
    a.action->setToolTip(wrapping_tooltip(why.isEmpty() ? a.what : why, name));
  }
}

void RunsView::export_model_selected() {
  const auto ids = selected_ids();
  if (ids.size() != 1) return;
  const std::string refusal = attempt_refusal(store_, ids[0]);
  if (!refusal.empty()) {
    plain_message(this, QMessageBox::Information, tr("Export model"), as_sentence(QString::fromStdString(refusal)));
    return;
  }
  auto* dialog = new ExportModelDialog(store_, ids[0], this);
  dialog->setAttribute(Qt::WA_DeleteOnClose);
  const int64_t run = ids[0];
  connect(dialog, &ExportModelDialog::exported, this,
          [this, run](const QString& path, const QString& format, const QString& dtype) {
            Q_EMIT status_message(tr("Exported run %1's model (%2, %3) to %4").arg(run).arg(format, dtype, path));
          });
  dialog->show();
}

void RunsView::show_menu(const QPoint& at) {
  const auto ids = selected_ids();
  if (ids.empty()) return;
  QMenu menu(this);
  menu.addAction(ids.size() == 1 ? tr("Open charts") : tr("Compare %1 runs").arg(ids.size()), this,
                 [this, ids] { Q_EMIT open_requested(ids); });
  // The menu's own wording of a toolbar action, enabled as it is, its tooltip saying why not.
  menu.setToolTipsVisible(true);
  const auto like = [this](QAction* item, const char* toolbar_action) {
    const QAction* a = findChild<QAction*>(toolbar_action);
    item->setEnabled(a->isEnabled());
    item->setToolTip(a->toolTip());
  };
  if (ids.size() == 1)
    like(menu.addAction(tr("Resume from its checkpoint"), this, [this, ids] { Q_EMIT resume_requested(ids[0]); }),
         "resumeAction");
  menu.addSeparator();
  if (ids.size() == 1) like(menu.addAction(tr("Rename…"), this, &RunsView::rename_selected), "renameAction");
  like(menu.addAction(tr("Tag…"), this, &RunsView::tag_selected), "tagAction");
  if (ids.size() == 1) menu.addAction(tr("Notes…"), this, &RunsView::notes_selected);
  like(menu.addAction(tr("Delete…"), this, &RunsView::delete_selected), "deleteAction");
  menu.addSeparator();
  menu.addAction(tr("Export CSV…"), this, [this, ids] { Q_EMIT export_csv_requested(ids); });
  menu.addAction(tr("Export charts…"), this, [this, ids] { Q_EMIT export_charts_requested(ids); });
  if (ids.size() == 1) {
    like(menu.addAction(tr("Predict on images…"), this, &RunsView::predict_selected), "predictAction");
    like(menu.addAction(tr("Predict on a folder of images…"), this, &RunsView::predict_folder_selected),
         "predictAction");
  }
  if (ids.size() == 1) menu.addAction(export_model_action_);
  menu.exec(table_->viewport()->mapToGlobal(at));
}

}  // namespace ampwb::ui
