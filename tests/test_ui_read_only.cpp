// The workbench on a run store this user may only read, as a colleague's folder is: the file and its folder
// write-protected. The window opens it and says so; its runs are listed, their charts open and their notes show;
// Train, Resume, Rename, Tag and Delete are refused up front with the reason; and the store's bytes stay as they were.
// Root writes whatever it likes, so run as root the program first becomes "nobody" (main), as that colleague would be.
#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>
#include <QAction>
#include <QFile>
#include <QInputDialog>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QTableView>
#include <QTimer>

#include <cstdio>
#include <filesystem>
#include <string>

#include "compare_view.h"
#include "main_window.h"
#include "run_controls.h"
#include "runs_view.h"
#include "store/sweep_record.h"
#include "sweep_view.h"
#include "test_ui_util.h"

namespace ampwb::ui::test {

class ReadOnlyStore : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  QString folder_, db_;
  int64_t run_ = 0, sweep_ = 0;
  QByteArray bytes_;

  static QByteArray read_all(const QString& path) {
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
  }

 private Q_SLOTS:
  void initTestCase() {
    const QString data = write_stripes(dir_.filePath("stripes"), 8, 16);
    folder_ = dir_.filePath("colleague");
    QVERIFY(QDir().mkpath(folder_));
    db_ = folder_ + "/runs.sqlite";
    run_ = train_into_store(db_, tiny_config(data, 1, 2));
    {  // closed before the store is write-protected and its bytes read
      RunStore store(db_.toStdString());
      store.set_notes(run_, "lr 0.05: the baseline");
      const std::string point = R"({"values": {"seed": "0"}, "config": {}})";
      sweep_ = create_sweep(store, "seeds", R"({"grid": {"seed": [0, 1]}})", "local", {point, point});
    }
    const auto read = QFileDevice::ReadOwner | QFileDevice::ReadGroup | QFileDevice::ReadOther;
    const auto enter = QFileDevice::ExeOwner | QFileDevice::ExeGroup | QFileDevice::ExeOther;
    QVERIFY(QFile::setPermissions(db_, read));
    QVERIFY(QFile::setPermissions(folder_, read | enter));
    QVERIFY2(::access(qPrintable(db_), W_OK) != 0, "the store is still writable: the test would prove nothing");
    bytes_ = read_all(db_);
    QVERIFY(!bytes_.isEmpty());
  }

  void cleanupTestCase() {
    QFile::setPermissions(folder_, QFile::permissions(folder_) | QFileDevice::WriteOwner);
    QFile::setPermissions(db_, QFile::permissions(db_) | QFileDevice::WriteOwner);
  }

  void the_window_opens_it_and_refuses_to_train_saying_why() {
    MainWindow w(db_);
    QVERIFY2(w.windowTitle().contains("read-only"), qPrintable(w.windowTitle()));
    const QString shown = child<QLabel>(w, "storePath")->text();
    QVERIFY2(shown.endsWith("(read-only)"), qPrintable(shown));

    const QString why = "the run store " + db_ + " is read-only here";
    auto* train = child<QPushButton>(w, "trainButton");
    QVERIFY(!train->isEnabled());
    QVERIFY2(tooltip_text(train->toolTip()).startsWith("Cannot train: " + why), qPrintable(train->toolTip()));
    QVERIFY2(child<QLabel>(w, "statusLine")->text().contains(why), qPrintable(child<QLabel>(w, "statusLine")->text()));
    QVERIFY(!w.start_training());  // Ctrl+R while Train is disabled
    const QString resume = w.resume_run(run_);
    QVERIFY2(resume.startsWith(QString("Run %1 cannot be resumed: %2").arg(run_).arg(why)), qPrintable(resume));

    // Nor can its sweeps be cancelled: that would cancel their jobs without recording it.
    w.sweep_view()->reload();
    QAction* cancel = w.sweep_view()->cancel_action();
    QVERIFY(!cancel->isEnabled());
    QVERIFY2(tooltip_text(cancel->toolTip())
                 .startsWith(QString("Sweep %1 cannot be cancelled from here: %2").arg(sweep_).arg(why)),
             qPrintable(cancel->toolTip()));

    // The runs are there to look at: listed, and their charts open in Compare.
    QCOMPARE(child<QTableView>(w, "runsTable")->model()->rowCount(), 1);
    w.open_runs({run_});
    QCOMPARE(w.compare_view()->series().size(), size_t{1});
    QVERIFY(!w.compare_view()->series().front()->steps.empty());
  }

  void the_runs_view_offers_no_edits_and_shows_the_notes() {
    RunStore store(db_.toStdString(), RunStore::Mode::Existing);
    QVERIFY(store.read_only());
    RunsView view(store);
    view.reload();
    view.select({run_});
    for (const char* name : {"resumeAction", "renameAction", "tagAction", "deleteAction"}) {
      auto* action = view.findChild<QAction*>(name);
      QVERIFY2(action, name);
      QVERIFY2(!action->isEnabled(), name);
      QVERIFY2(tooltip_text(action->toolTip()).startsWith("The run store " + db_ + " is read-only here"),
               qPrintable(action->toolTip()));
    }
    // Notes open in a dialog that shows them and cannot change them.
    QString notes_shown;
    bool editable = true;
    QTimer::singleShot(0, [&] {
      if (auto* dialog = qobject_cast<QInputDialog*>(QApplication::activeModalWidget())) {
        auto* edit = dialog->findChild<QPlainTextEdit*>();
        notes_shown = edit ? edit->toPlainText() : QString();
        editable = edit && !edit->isReadOnly();
        dialog->accept();
      }
    });
    view.findChild<QAction*>("notesAction")->trigger();
    QCOMPARE(notes_shown, QString("lr 0.05: the baseline"));
    QVERIFY(!editable);
    QCOMPARE(read_all(db_), bytes_);
    QVERIFY(!QFile::exists(db_ + "-wal"));
  }
};

}  // namespace ampwb::ui::test

// Root ignores permissions: as root the test runs in a child that becomes nobody, with a folder of its own for its
// temporary files (the machine's temporary folder may be root's alone), removed afterwards by the parent.
int main(int argc, char** argv) {
  using ampwb::ui::test::ReadOnlyStore;
  if (::geteuid() != 0) return ampwb::ui::test::run_ui_test<ReadOnlyStore>(argc, argv);
  std::string folder = (std::filesystem::temp_directory_path() / "ampwb_read_only_XXXXXX").string();
  if (!::mkdtemp(folder.data()) || ::chown(folder.c_str(), 65534, 65534) != 0) {
    std::perror("test_ui_read_only: a temporary folder for nobody");
    return 1;
  }
  const pid_t child = ::fork();
  if (child == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0) {
      std::perror("test_ui_read_only: running as root, and cannot become nobody to be refused writes");
      std::_Exit(1);
    }
    ::setenv("TMPDIR", folder.c_str(), 1);
    ::unsetenv("XDG_CACHE_HOME");  // CTest's belong to root
    ::unsetenv("XDG_RUNTIME_DIR");
    std::_Exit(ampwb::ui::test::run_ui_test<ReadOnlyStore>(argc, argv));
  }
  int status = 0;
  const bool waited = child > 0 && ::waitpid(child, &status, 0) == child;
  std::filesystem::remove_all(folder);
  return waited && WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

#include "test_ui_read_only.moc"
