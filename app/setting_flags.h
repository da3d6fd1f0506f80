// The engine names a refused setting by its key in neutral words (core/setting_error.h); the CLI says it with the
// flag that sets it. Each flag names its setting where it is declared (names_setting), so the flags and this table
// cannot drift apart, and main prints "--batch-size: the batch size must be at least 2 ...".
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace ampwb::cli {

// Records that `option` sets the engine setting `key` (a config_settings key such as "batch_size", or a
// BenchConfig field); returns `option`. Every command that takes the setting must spell its flag the same.
CLI::Option* names_setting(CLI::Option* option, const std::string& key);

// The flag that sets `key` ("--batch-size"), "" when no flag declared so far does.
std::string flag_of_setting(const std::string& key);

// `message` about the setting `key`, led by the flag that sets it ("--batch-size: the batch size ..."); the message
// alone when no flag does.
std::string said_with_flag(const std::string& key, const std::string& message);

}  // namespace ampwb::cli
