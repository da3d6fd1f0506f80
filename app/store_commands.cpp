// The commands that export or change stored runs, and look after the store itself: export csv|chart, delete,
// rename, tag, note, store check|backup. Every one takes --db.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "commands.h"
#include "core/error.h"
#include "store/csv_export.h"
#include "store/run_store.h"
#include "store/store_location.h"

namespace ampwb::cli {
namespace {

// Stores are opened Existing: a missing file is an error, a write-protected one is read, not changed.
RunStore open_existing(const std::string& db) { return RunStore(store_path(db), RunStore::Mode::Existing); }

struct ExportCsvOptions {
  std::vector<std::string> runs;
  std::string out, db;
  bool all = false;
};

int export_csv_command(const ExportCsvOptions& options) {
  RunStore store = open_existing(options.db);
  std::vector<int64_t> ids;
  if (options.all) {
    for (const RunRecord& r : store.runs()) ids.push_back(r.id);
  } else {
    ids = store.resolve_each(options.runs);
  }
  for (const std::string& file : export_csv(store, ids, options.out)) std::printf("%s\n", file.c_str());
  return 0;
}

// A run (RUN) and, for rename, tag and note, one more word (NAME, TAG, TEXT).
struct EditOptions {
  std::string run, value, db;
  bool remove = false;  // tag --remove
};

int delete_command(const EditOptions& options) {
  RunStore store = open_existing(options.db);
  const RunRecord r = store.run(store.resolve(options.run));
  const std::vector<CheckpointInfo> checkpoints = store.checkpoints(r.id);
  store.remove(r.id);
  std::printf("deleted run %lld (%s)\n", static_cast<long long>(r.id), printable(r.name).c_str());
  std::error_code ec;
  for (const CheckpointInfo& c : checkpoints)  // a finished run's were removed with their folder
    if (std::filesystem::exists(c.path, ec)) std::printf("  its checkpoint file is kept: %s\n", c.path.c_str());
  return 0;
}

int rename_command(const EditOptions& options) {
  RunStore store = open_existing(options.db);
  const int64_t id = store.resolve(options.run);
  store.rename(id, options.value);
  std::printf("run %lld is now named '%s'\n", static_cast<long long>(id), options.value.c_str());
  return 0;
}

int tag_command(const EditOptions& options) {
  RunStore store = open_existing(options.db);
  const int64_t id = store.resolve(options.run);
  if (options.remove)
    store.remove_tag(id, options.value);
  else
    store.add_tag(id, options.value);
  std::printf("run %lld: %s tag '%s'\n", static_cast<long long>(id), options.remove ? "removed" : "added",
              options.value.c_str());
  return 0;
}

int note_command(const EditOptions& options) {
  RunStore store = open_existing(options.db);
  const int64_t id = store.resolve(options.run);
  store.set_notes(id, options.value);
  std::printf("run %lld: notes set\n", static_cast<long long>(id));
  return 0;
}

struct StoreOptions {
  std::string file, db;  // file: backup's destination
};

int store_check_command(const StoreOptions& options) {
  const std::string path = store_path(options.db);
  std::error_code ec;
  if (!is_database_server(path) && !std::filesystem::is_regular_file(path, ec))
    throw Error("no run store at '" + path + "'");
  std::string problems;
  try {
    problems = RunStore(path, RunStore::Mode::ReadOnly).integrity_check();
  } catch (const StoreError& e) {
    // SQLite's own header check, not a read of ours: a descriptor of the file opened and closed beside SQLite's
    // would drop its locks (store/sqlite_locks.h). Anything else is not a damaged store but no store at all.
    if (e.not_a_database()) throw Error("'" + path + "' is not a run store (not an SQLite database)");
    if (!e.damaged()) throw;  // a newer schema, another program's database, a locked file: said as they are
    problems = e.what();
  }
  if (problems == "ok") {
    if (is_database_server(path))
      std::printf("the run store '%s' is whole (PostgreSQL: every row read, none without its run)\n",
                  location_without_password(path).c_str());
    else
      std::printf("the run store '%s' is whole (SQLite integrity_check: ok)\n", path.c_str());
    return 0;
  }
  std::printf("the run store '%s' is damaged:\n", location_without_password(path).c_str());
  size_t at = 0;
  for (int line = 0; at < problems.size(); ++line) {  // SQLite lists every cell: the first 20 lines say enough
    const size_t end = std::min(problems.find('\n', at), problems.size());
    if (line == 20) {
      std::printf("  ... and more\n");
      break;
    }
    std::printf("  %s\n", problems.substr(at, end - at).c_str());
    at = end + 1;
  }
  std::printf(
      "keep a copy (ampwb store backup FILE), then recover what is readable into a new store:\n"
      "  sqlite3 '%s' .recover | sqlite3 recovered.sqlite    (SQLite's shell: Debian package sqlite3)\n",
      path.c_str());
  return 1;
}

int store_backup_command(const StoreOptions& options) {
  const std::string path = store_path(options.db);
  const RunStore store(path, RunStore::Mode::ReadOnly);
  store.backup_to(options.file);
  std::printf("backed up the run store '%s' (%zu runs) to '%s'\n", path.c_str(), store.runs().size(),
              options.file.c_str());
  return 0;
}

// Adds `name` RUN [WORD], taking --db; `value_name` names the second operand (none when empty).
CLI::App* add_edit_command(CLI::App& app, Invocation& invocation, const std::string& name, const std::string& help,
                           const std::string& value_name, const std::string& value_help,
                           int (*command)(const EditOptions&), std::shared_ptr<EditOptions> options) {
  CLI::App* edit = app.add_subcommand(name, help);
  edit->add_option("RUN", options->run, "a run id or a unique run name")->type_name("")->required();
  if (!value_name.empty()) edit->add_option(value_name, options->value, value_help)->type_name("")->required();
  add_db_option(edit, options->db);
  run_on_parse(edit, invocation, options, command);
  return edit;
}

void add_export_commands(CLI::App& app, Invocation& invocation) {
  CLI::App* export_cmd = app.add_subcommand("export", "stored runs as CSV files or as a chart image");
  export_cmd->require_subcommand(1);

  auto csv_options = std::make_shared<ExportCsvOptions>();
  CLI::App* csv = export_cmd->add_subcommand("csv", "per-step, per-epoch, summary and long-form CSV of runs");
  CLI::Option* all = csv->add_flag("--all", csv_options->all, "every stored run");
  csv->add_option("RUN", csv_options->runs, "run ids or unique run names")
      ->type_name("")
      ->default_str("")
      ->excludes(all);
  csv->add_option("--out", csv_options->out, "the folder for the files (made when missing)")
      ->type_name("DIR")
      ->required();
  add_db_option(csv, csv_options->db);
  csv->callback([&invocation, csv_options] {
    if (csv_options->runs.empty() && !csv_options->all) throw CLI::RequiredError("RUN... or --all");
    invocation.run = [csv_options] { return export_csv_command(*csv_options); };
  });

  auto chart_options = std::make_shared<ExportChartOptions>();
  CLI::App* chart = export_cmd->add_subcommand(
      "chart", "a chart of runs as PNG, SVG or PDF, drawn without a display (the GUI's chart)");
  chart->add_option("RUN", chart_options->runs, "run ids or unique run names")
      ->type_name("")
      ->default_str("")
      ->required();
  chart->add_option("--metric", chart_options->metric, "the chart")
      ->type_name("loss|accuracy|loss-scale|epoch-time|data-wait|histogram")
      ->check(CLI::IsMember({"loss", "accuracy", "loss-scale", "epoch-time", "data-wait", "histogram"}))
      ->required();
  chart->add_option("--out", chart_options->out, "the image file; its extension picks the format")
      ->type_name("FILE.png|.svg|.pdf")
      ->required();
  add_number(chart, "--width", chart_options->width, "px, 100 to 10000")->check(CLI::Range(100, 10000).description(""));
  add_number(chart, "--height", chart_options->height, "px, 100 to 10000")
      ->check(CLI::Range(100, 10000).description(""));
  add_number(chart, "--smoothing", chart_options->smoothing, "exponential smoothing of step curves, in [0, 1)")
      ->check(CLI::Validator(
          [](const std::string& text) {
            const double value = std::strtod(text.c_str(), nullptr);
            return value >= 0 && value < 1 ? std::string() : "must be in [0, 1), got " + text;
          },
          ""));
  chart
      ->add_option("--histogram", chart_options->histogram,
                   "with --metric histogram: the weight or activation gradients")
      ->type_name("weight|activation")
      ->check(CLI::IsMember({"weight", "activation"}));
  chart
      ->add_option("--x-axis", chart_options->x_axis,
                   "what the curves are drawn against: step, epoch or wall (wall-clock seconds; per-epoch charts "
                   "read step as epoch)")
      ->check(CLI::IsMember({"step", "epoch", "wall"}))
      ->type_name("AXIS");
  chart
      ->add_option("--group-by", chart_options->group_by,
                   "draw each group's mean ± std on the loss and accuracy charts: a configuration key (as ampwb "
                   "show lists them: precision.mode, batch_size, lr, ...), all-but-seed, or none (default: "
                   "all-but-seed where the runs differ only by seed)")
      ->type_name("KEY");
  add_db_option(chart, chart_options->db);
  run_on_parse(chart, invocation, chart_options, export_chart_command);
}

}  // namespace

void add_store_commands(CLI::App& app, Invocation& invocation) {
  add_export_commands(app, invocation);
  add_edit_command(app, invocation, "delete", "delete a run and all its records (its checkpoint files stay)", "", "",
                   delete_command, std::make_shared<EditOptions>());
  add_edit_command(app, invocation, "rename", "rename a run", "NAME", "the new name", rename_command,
                   std::make_shared<EditOptions>());
  auto tag_options = std::make_shared<EditOptions>();
  add_edit_command(app, invocation, "tag", "tag a run (or, with --remove, untag it)", "TAG", "the tag", tag_command,
                   tag_options)
      ->add_flag("--remove", tag_options->remove, "remove the tag instead");
  add_edit_command(app, invocation, "note", "set a run's notes", "TEXT", "the notes (replacing any)", note_command,
                   std::make_shared<EditOptions>());

  CLI::App* store = app.add_subcommand("store", "look after the run store itself");
  store->require_subcommand(1);
  auto check_options = std::make_shared<StoreOptions>();
  CLI::App* check = store->add_subcommand("check", "SQLite's integrity check of the run store");
  add_db_option(check, check_options->db);
  run_on_parse(check, invocation, check_options, store_check_command);
  auto backup_options = std::make_shared<StoreOptions>();
  CLI::App* backup = store->add_subcommand("backup", "a consistent copy of the run store, safe while runs record");
  backup->add_option("FILE", backup_options->file, "the copy (never overwritten)")->type_name("")->required();
  add_db_option(backup, backup_options->db);
  run_on_parse(backup, invocation, backup_options, store_backup_command);
}

}  // namespace ampwb::cli
