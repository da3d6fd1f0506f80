// The runs view: every stored run in a sortable, filterable table (RunsModel behind a QSortFilterProxyModel),
// with rename, tag, note and delete (confirmed), and requests the main window carries out: open, compare, resume,
// export. Edits go to the run store at once. Runs are also recorded by other processes (a CLI `ampwb train` into the
// same store, a Slurm job's tasks, another window), so while the view is shown it follows the store every
// kPollIntervalMs from a thread of its own (RunsPoller): a new run appears, a live one's row follows its progress,
// and the selection, sort order and scroll position stay.
#pragma once

#include <QWidget>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "column_widths.h"
#include "runs_model.h"
#include "sweep_view.h"

class QAction;
class QLineEdit;
class QSortFilterProxyModel;
class QTableView;
class QLabel;
class QTimer;

namespace ampwb::ui {

class RunsPoller;

class RunsView : public QWidget {
  Q_OBJECT
 public:
  static constexpr int kPollIntervalMs = SweepView::kPollIntervalMs;  // the Sweeps tab's pace

  // `location`: where the view's own polling connection opens the store (a PostgreSQL URI with its password, where
  // it has one); empty: store.path().
  explicit RunsView(RunStore& store, QWidget* parent = nullptr, const std::string& location = {});
  ~RunsView() override;

  void reload();  // re-reads the store (also marks runs whose process died as interrupted)
  // One poll of the store now (it also runs every kPollIntervalMs while the view is shown); the rows change when
  // it finds the store changed. Returns at once.
  void poll();
  std::vector<int64_t> selected_ids() const;
  void select(const std::vector<int64_t>& ids);
  void set_filter(const QString& text);
  RunsModel* model() const { return model_; }
  QSortFilterProxyModel* proxy() const { return proxy_; }
  QTableView* table() const { return table_; }

  // The edits, without dialogs (the interactive versions ask first). Each returns an error text, empty on success.
  QString rename(int64_t id, const QString& name);
  QString add_tag(int64_t id, const QString& tag);
  QString remove_tag(int64_t id, const QString& tag);
  QString set_notes(int64_t id, const QString& notes);
  QString remove(int64_t id);

  // Asks before deleting; replaceable for tests.
  std::function<bool(const QString& question)> confirm;
  // Asks which images "Predict on images…" takes (empty: cancelled); replaceable for tests.
  std::function<QStringList()> choose_images;
  // Asks which folder "Predict on a folder of images…" takes ("": cancelled); replaceable for tests.
  std::function<QString()> choose_image_folder;
  // The selected run's final weights on images the user picks (choose_images), in a PredictDialog (predict_dialog.h).
  void predict_selected();
  // The same on every image file of a folder the user picks (choose_image_folder), sub-folders included.
  void predict_folder_selected();
  // The selected run's final weights as an ONNX or safetensors file, in an ExportModelDialog
  // (export_model_dialog.h); the status message names the file written.
  void export_model_selected();
  // "Export model…": enabled for one selected run that has final weights, its tooltip saying why when not.
  QAction* export_model_action() const { return export_model_action_; }

 Q_SIGNALS:
  void open_requested(const std::vector<int64_t>& ids);  // one run: its charts; several: a comparison
  void resume_requested(int64_t id);
  void export_csv_requested(const std::vector<int64_t>& ids);
  void export_charts_requested(const std::vector<int64_t>& ids);
  void status_message(const QString& text);

 protected:
  void showEvent(QShowEvent* event) override;
  void hideEvent(QHideEvent* event) override;

 private:
  void apply_polled(std::vector<RunsModel::Row> rows);
  void rename_selected();
  void tag_selected();
  void notes_selected();
  void edit_text(int64_t id, std::string RunRecord::*field, const QString& title,
                 const std::function<QString(const QString& shown, bool& ok)>& ask,
                 const std::function<void(const QString& text, const std::string& were)>& write);
  void delete_selected();
  void predict_with(const std::function<QStringList()>& choose);
  void show_menu(const QPoint& at);
  void update_count();
  void update_actions();

  RunStore& store_;
  RunsModel* model_ = nullptr;
  QSortFilterProxyModel* proxy_ = nullptr;
  QTableView* table_ = nullptr;
  ColumnWidths widths_;  // of table_
  QLineEdit* filter_ = nullptr;
  QLabel* count_ = nullptr;
  QAction* export_model_action_ = nullptr;
  enum class Selected { One, Some };  // the runs an action acts on: exactly one, or one or more
  struct SelectionAction {
    QAction* action;
    Selected needs;
    bool writes;   // into the store: refused where it is read-only
    QString what;  // its tooltip while it is enabled
    // Why the one run selected cannot be acted on (the store's words), from its row as last read, empty when it
    // can; unset: any run can.
    std::function<std::string(const RunsModel::Row&)> refusal = {};
  };
  std::vector<SelectionAction> selection_actions_;  // enabled by update_actions()
  QTimer* poll_timer_ = nullptr;
  RunsPoller* poller_ = nullptr;
  QString poll_error_;  // the last poll's, shown beside the count until a poll succeeds
};

}  // namespace ampwb::ui
