// The headless subcommands of ampwb. Each returns the process exit status.
#pragma once

#include "args.h"

namespace ampwb::cli {

int train_command(Args& args);
int bench_command(Args& args);
void print_usage();

}  // namespace ampwb::cli
