// The workbench's file dialogs: Qt's own widget dialogs, whose folder listings and completers never open a file.
//
// Qt's default icon provider reads a file's first bytes to guess its type whenever the name does not say it
// ("runs.sqlite-wal", "runs.sqlite-shm"), and the platform's dialog (GTK, loaded into this process) does the same.
// An open and close of the run store's files inside the GUI's process is what drops SQLite's POSIX locks
// (engine/store/sqlite_locks.h): these dialogs name types and pick icons from names and stat() alone.
#pragma once

#include <QString>
#include <QStringList>

class QFileDialog;
class QWidget;

namespace ampwb::ui {

// An existing folder, or an empty string when the user cancelled.
QString choose_folder(QWidget* parent, const QString& caption, const QString& start);

// A file to write, or an empty string; `selected_filter` in and out, as QFileDialog::getSaveFileName takes it.
// `note`, where given, is a line of plain text under the file list saying what will be written (the object
// "saveNote"): the title bar may not show the caption.
QString choose_save_file(QWidget* parent, const QString& caption, const QString& suggested, const QString& filters,
                         QString* selected_filter = nullptr, const QString& note = {});

// Whether writing `files` may go ahead: true where none of them exists yet, else the user's answer to a question that
// names those that do (they would be replaced; the folder's other files stay).
bool confirm_replacing(QWidget* parent, const QString& title, const QStringList& files);

// The dialog both use, not yet shown (tests drive it).
QFileDialog* new_file_dialog(QWidget* parent, const QString& caption, const QString& start);

}  // namespace ampwb::ui
