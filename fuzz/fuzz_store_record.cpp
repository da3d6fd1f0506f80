// The JSON a run store keeps per run (its configuration), decoded as `--resume` and the GUI decode it.
#include <nlohmann/json.hpp>

#include "train/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const ampwb::TrainConfig c = nlohmann::json::parse(data, data + size).get<ampwb::TrainConfig>();
    ampwb::validate(c);
  } catch (const std::exception&) {
  }
  return 0;
}
