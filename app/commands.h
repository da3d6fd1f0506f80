// The headless subcommands of ampwb. Each returns the process exit status.
#pragma once

#include <string>

#include "args.h"

namespace ampwb::cli {

int train_command(Args& args);
int bench_command(Args& args);
int dataset_command(Args& args);  // dataset_command.cpp: inspect, sample, bench-decode, bench-loader
void print_usage();

// The run store commands (runs_commands.cpp): runs, show, compare, export csv, delete, rename, tag, note.
int runs_command(Args& args);
int show_command(Args& args);
int compare_command(Args& args);
int export_command(Args& args);
int delete_command(Args& args);
int rename_command(Args& args);
int tag_command(Args& args);
int note_command(Args& args);
int store_command(Args& args);  // check, backup FILE

// The run store file: --db PATH, else $AMPWB_DB, else the XDG data folder (RunStore::default_path).
std::string store_path(Args& args);

}  // namespace ampwb::cli
