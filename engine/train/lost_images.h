// Images whose files vanish, shrink or change during a run, which the loaders skip (data/loader.h): a note for the
// run's record after each epoch that lost some, and the end of the run past a tenth of the dataset, when the folder
// itself is likely gone (moved, unmounted, a failing disk) and training on what is left would mislead.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/loader.h"

namespace ampwb {

class LostImageWatch {
 public:
  LostImageWatch(const DataLoader& train, const DataLoader& validation, std::string data_dir);

  // "epoch 3: skipped 2 images whose files vanished, ...: 'a.png' (unreadable (...)), ...": the images lost since
  // the last note, or nothing when none was.
  std::optional<std::string> note(int epoch);
  // Why the run stops, once more than a tenth of the dataset's images are lost; nothing before.
  std::optional<std::string> too_many() const;

 private:
  std::vector<LostImage> lost() const;  // the training split's, then the validation split's

  const DataLoader& train_;
  const DataLoader& validation_;
  std::string data_dir_;
  int64_t images_ = 0, limit_ = 0;
  size_t noted_ = 0;
};

}  // namespace ampwb
