// golden_regenerate FILE: trains the golden trajectory (golden_trajectory.h) in every CPU mode and writes the golden
// file that test_golden compares against. Run through scripts/regenerate-golden.sh, and only for a change that is
// meant to alter the curves.
#include <cstdio>
#include <fstream>
#include <iostream>

#include "golden_trajectory.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s FILE\n", argv[0]);
    return 2;
  }
  using namespace ampwb::golden;
  const Setup setup;
  std::vector<std::pair<std::string, std::vector<Step>>> runs;
  for (const std::string& mode : modes()) runs.emplace_back(mode, train(mode, setup));
  const std::string text = document(setup, this_machine(setup), runs);
  std::ofstream out(argv[1], std::ios::binary);
  out << text;
  out.close();
  if (!out) {
    std::fprintf(stderr, "cannot write %s\n", argv[1]);
    return 1;
  }
  std::cout << "wrote " << argv[1] << " (" << this_machine(setup).isa << ", " << this_machine(setup).onednn << ")\n";
  return 0;
}
