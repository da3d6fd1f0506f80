// An error about one setting, in neutral words, with the setting's key so that each front end can point at it in
// its own words (the CLI its flag, the GUI its field).
#pragma once

#include <string>
#include <utility>

#include "core/error.h"

namespace ampwb {

// A refused setting. The message names the setting as people say it ("the batch size must be at least 2, got 1"),
// never a front end's spelling; setting() is its key as the configuration's JSON spells it: a config_settings key
// for a training run ("batch_size", "optimizer.momentum"), a BenchConfig field for a benchmark ("num_classes").
// A key and a whole message, rather than placeholders in the text: the engine's message reads whole wherever it
// lands (a stored run's failure, a log), and a front end only adds its name for the setting in front.
class SettingError : public Error {
 public:
  SettingError(std::string setting, const std::string& message) : Error(message), setting_(std::move(setting)) {}
  const std::string& setting() const { return setting_; }

 private:
  std::string setting_;
};

}  // namespace ampwb
