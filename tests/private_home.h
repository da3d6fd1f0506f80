// Each test program runs with a private home (test_main.cpp, test_ui_util.h): HOME and the XDG folders in a
// temporary directory, so no test, and no `ampwb` a test starts, can write the user's own run store, cache or
// settings, and a user's own `ampwb` running beside the suite cannot fail it. What the program still wrote into
// the AMP Workbench folders under that private HOME (code that ignored the XDG folders) fails the program.
#pragma once

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

namespace ampwb::test {

// Every file and folder in the AMP Workbench folders under `home` (~/.local/share/ampwb, ~/.cache/ampwb,
// ~/.config/ampwb), sorted; empty when none exists.
inline std::vector<std::string> ampwb_files_under(const std::filesystem::path& home) {
  std::vector<std::string> found;
  for (const char* folder : {".local/share/ampwb", ".cache/ampwb", ".config/ampwb"}) {
    std::error_code ec;
    const std::filesystem::path dir = home / folder;
    if (!std::filesystem::exists(dir, ec)) continue;
    found.push_back(dir.string());
    for (const auto& entry : std::filesystem::recursive_directory_iterator(dir, ec)) found.push_back(entry.path());
  }
  std::sort(found.begin(), found.end());
  return found;
}

}  // namespace ampwb::test
