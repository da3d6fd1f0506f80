// ampwb: the AMP Workbench executable. Headless subcommands never need a display.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "commands.h"
#include "core/error.h"
#include "train_flags.h"

namespace ampwb::cli {

void print_usage() {
  std::printf(
      "AMP Workbench %s: mixed-precision training experiments\n\n"
      "usage: ampwb COMMAND [options]\n\n"
      "commands:\n"
      "  train   train a ResNet on an image folder\n"
      "%s          [--json]\n"
      "  bench   time training steps on synthetic data\n"
      "          [--depth 18] [--image-size 224] [--batch-size 16] [--precision fp32] [--steps 20]\n"
      "          [--warmup 3] [--classes 1000] [--device cpu] [--threads N] [--json]\n"
      "  help    this text\n\n"
      "depths: 18 34 50 101 152 (ImageNet family), 20 32 44 56 110 (CIFAR family)\n",
      AMPWB_VERSION, train_flags_help());
}

}  // namespace ampwb::cli

int main(int argc, char** argv) {
  using namespace ampwb::cli;
  const std::vector<std::string> tokens(argv + 1, argv + argc);
  if (tokens.empty() || tokens[0] == "help" || tokens[0] == "--help" || tokens[0] == "-h") {
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
    std::fprintf(stderr, "ampwb: unknown command '%s' (see ampwb help)\n", tokens[0].c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ampwb %s: error: %s\n", tokens[0].c_str(), e.what());
    return 1;
  }
}
