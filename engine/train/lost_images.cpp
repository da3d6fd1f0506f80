// The run's watch over images lost mid-run (lost_images.h).
#include "train/lost_images.h"

#include <algorithm>

namespace ampwb {
namespace {

// Up to three of `lost` from `from` on, with why, and how many more.
std::string examples(const std::vector<LostImage>& lost, size_t from) {
  std::string text;
  for (size_t i = from; i < lost.size() && i < from + 3; ++i)
    text += (i > from ? ", '" : "'") + lost[i].path + "' (" + lost[i].reason + ")";
  if (lost.size() > from + 3) text += " and " + std::to_string(lost.size() - from - 3) + " more";
  return text;
}

}  // namespace

LostImageWatch::LostImageWatch(const DataLoader& train, const DataLoader& validation, std::string data_dir)
    : train_(train),
      validation_(validation),
      data_dir_(std::move(data_dir)),
      images_(train.size() + validation.size()),
      limit_(std::max<int64_t>(1, images_ / 10)) {}

std::vector<LostImage> LostImageWatch::lost() const {
  std::vector<LostImage> all = train_.lost_images();
  for (LostImage& l : validation_.lost_images()) all.push_back(std::move(l));
  return all;
}

std::optional<std::string> LostImageWatch::note(int epoch) {
  const std::vector<LostImage> all = lost();
  if (all.size() <= noted_) return std::nullopt;
  const size_t fresh = all.size() - noted_;
  std::string text = "epoch " + std::to_string(epoch) + ": skipped " + std::to_string(fresh) +
                     (fresh == 1 ? " image whose file" : " images whose files") +
                     " vanished, shrank or changed since the dataset was read: " + examples(all, noted_) + " (" +
                     std::to_string(all.size()) + " of " + std::to_string(images_) + " in all; the run stops past " +
                     std::to_string(limit_) + ")";
  noted_ = all.size();
  return text;
}

std::optional<std::string> LostImageWatch::too_many() const {
  if (train_.stats().lost + validation_.stats().lost <= limit_) return std::nullopt;
  const std::vector<LostImage> all = lost();
  return std::to_string(all.size()) + " of the dataset's " + std::to_string(images_) +
         " images vanished, shrank or changed since it was read (more than the tenth a run goes on without), e.g. " +
         examples(all, 0) + ": was the data folder '" + data_dir_ + "' moved, unmounted or rewritten? Put it back " +
         "and resume the run";
}

}  // namespace ampwb
