// The GUI process: application set-up (names for QSettings, icon, high-DPI), the GUI's own options, and the
// hidden screenshot scenario used by scripts/screenshots.sh.
#pragma once

#include <QString>
#include <QStringList>

class QApplication;

namespace ampwb::ui {

class MainWindow;

struct GuiOptions {
  QString db_path;                              // --db FILE, else $AMPWB_DB, else the XDG data folder
  bool db_chosen = false;                       // by --db or $AMPWB_DB, not the default
  QString screenshot_scenario;                  // --screenshot-scenario NAME (hidden)
  QString screenshot_dir = "docs/screenshots";  // --screenshot-dir DIR
};

// Parses what follows the program name (Qt's own options already removed); throws ampwb::Error on an unknown one.
GuiOptions parse_gui_options(const QStringList& args);
// Whether `ampwb ARGS` means the GUI: no arguments, or only the GUI's options.
bool is_gui_invocation(const QStringList& args);

// Whether to open the store at `path`, which the user named: where there is none, asks before a new, empty one is
// made (a mistyped path would otherwise open an empty store without a word).
bool may_create_store(const QString& path);
// Names (QSettings: ~/.config/ampwb/ampwb.conf), version, icon, desktop file name.
void init_application(QApplication& app);
// Call before constructing the QApplication.
void init_high_dpi();

// SIGTERM (a logout, a shutdown, kill), SIGHUP (the terminal it was started from closed) and SIGINT end the workbench
// as Quit does, without asking: a run training stops after its step with its checkpoint, resumable, instead of dying
// with the process. A second such signal ends the process at once.
void quit_on_signals(MainWindow& window);

int run_gui(int argc, char** argv);

}  // namespace ampwb::ui
