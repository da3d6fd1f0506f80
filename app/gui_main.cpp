// `ampwb` with no command (or only GUI options): the desktop workbench.
#include <QStringList>
#include <string>
#include <vector>

#include "gui_app.h"

namespace ampwb::cli {

bool is_gui_invocation(const std::vector<std::string>& tokens) {
  QStringList args;
  for (const std::string& t : tokens) args << QString::fromStdString(t);
  return ui::is_gui_invocation(args);
}

int gui_main(int argc, char** argv) { return ui::run_gui(argc, argv); }

}  // namespace ampwb::cli
