// ampwb: the AMP Workbench executable. Headless subcommands never need a display.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "commands.h"
#include "core/error.h"
#include "train_flags.h"

namespace ampwb::cli {

void print_usage();

#ifdef AMPWB_HAVE_GUI
// The desktop workbench (gui_main.cpp, export_chart_command.cpp).
bool is_gui_invocation(const std::vector<std::string>& tokens);
int gui_main(int argc, char** argv);
int export_chart_command(Args& args);
#else
// A headless build (AMPWB_BUILD_GUI=OFF): no command prints the usage; `export chart` says why it cannot.
bool is_gui_invocation(const std::vector<std::string>& tokens) { return tokens.empty(); }
int gui_main(int, char**) {
  print_usage();
  std::fprintf(stderr, "\nthis ampwb was built without the desktop workbench (AMPWB_BUILD_GUI=OFF)\n");
  return 2;
}
int export_chart_command(Args&) {
  throw ampwb::Error(
      "ampwb export chart needs the desktop workbench's charts: this build has none (AMPWB_BUILD_GUI=OFF)");
}
#endif

void print_usage() {
  std::printf(
      "AMP Workbench %s: mixed-precision training experiments\n\n"
      "usage: ampwb COMMAND [options]\n\n"
      "commands:\n"
      "  train   train a ResNet on an image folder\n"
      "%s          [--json] [--db FILE] [--resume RUN]\n"
      "  bench   time training steps on synthetic data\n"
      "          [--depth 18] [--image-size 224] [--batch-size 16] [--precision fp32] [--steps 20]\n"
      "          [--warmup 3] [--classes 1000] [--device cpu] [--threads N] [--json]\n"
      "  runs    list the recorded runs  [--status S] [--tag T] [--json] [--db FILE]\n"
      "  show    RUN: configuration, epochs and summary of a run  [--json] [--steps] [--db FILE]\n"
      "  compare RUN RUN...: side by side, speed-up against the first  [--json] [--db FILE]\n"
      "  export  csv RUN... --out DIR: steps, epochs and summaries as CSV  [--all] [--db FILE]\n"
      "  export  chart RUN... --metric loss|accuracy|loss-scale|epoch-time --out FILE.png|.svg|.pdf  [--db FILE]\n"
      "  (none)  the desktop workbench (GUI)  [--db FILE]\n"
      "  delete  RUN: the run and all its records  [--db FILE]\n"
      "  rename  RUN NAME  [--db FILE]\n"
      "  tag     RUN TAG  [--remove] [--db FILE]\n"
      "  note    RUN TEXT: set the run's notes  [--db FILE]\n"
      "  store   check: SQLite's integrity check | backup FILE: a consistent copy, safe while runs record\n"
      "          [--db FILE]\n"
      "  dataset inspect DIR [--json] | sample | bench-decode [--count N] | bench-loader DIR  (check, time data)\n"
      "  help    this text\n\n"
      "RUN is a run id or a unique run name. The run store is --db FILE, else $AMPWB_DB, else\n"
      "$XDG_DATA_HOME/ampwb/runs.sqlite (~/.local/share/ampwb/runs.sqlite).\n"
      "depths: 18 34 50 101 152 (ImageNet family), 20 32 44 56 110 (CIFAR family)\n",
      AMPWB_VERSION, train_flags_help());
}

}  // namespace ampwb::cli

int main(int argc, char** argv) {
  using namespace ampwb::cli;
  const std::vector<std::string> tokens(argv + 1, argv + argc);
  if (is_gui_invocation(tokens)) return gui_main(argc, argv);
  if (tokens[0] == "help" || tokens[0] == "--help" || tokens[0] == "-h") {
    print_usage();
    return 0;
  }
  if (tokens[0] == "--version") {
    std::printf("ampwb %s\n", AMPWB_VERSION);
    return 0;
  }
  try {
    Args args(std::vector<std::string>(tokens.begin() + 1, tokens.end()));
    if (tokens[0] == "train") return train_command(args);
    if (tokens[0] == "bench") return bench_command(args);
    if (tokens[0] == "dataset") return dataset_command(args);
    if (tokens[0] == "runs") return runs_command(args);
    if (tokens[0] == "show") return show_command(args);
    if (tokens[0] == "compare") return compare_command(args);
    if (tokens[0] == "export" && tokens.size() > 1 && tokens[1] == "chart") return export_chart_command(args);
    if (tokens[0] == "export") return export_command(args);
    if (tokens[0] == "delete") return delete_command(args);
    if (tokens[0] == "rename") return rename_command(args);
    if (tokens[0] == "tag") return tag_command(args);
    if (tokens[0] == "note") return note_command(args);
    if (tokens[0] == "store") return store_command(args);
    std::fprintf(stderr, "ampwb: unknown command '%s' (see ampwb help)\n", tokens[0].c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ampwb %s: error: %s\n", tokens[0].c_str(), e.what());
    return 1;
  }
}
