// The dataset report in words (for people) and as JSON (for tools and the run store).
#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/display_width.h"
#include "data/dataset.h"

namespace ampwb {
namespace {

constexpr size_t kSkippedShown = 40;  // in the text; the JSON lists them all

std::string quoted_list(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) s += (i ? ", '" : "'") + names[i] + "'";
  return s;
}

}  // namespace

// The report's parts, one field list each (nlohmann's type macros); the report itself is listed once, in to_json.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(DatasetReport::ClassCount, name, images, train, validation)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(DatasetReport::Skipped, path, reason)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(DatasetReport::SmallClass, name, images, reason)

std::string DatasetReport::to_text() const {
  std::ostringstream out;
  out << "dataset: " << root << "\n";
  if (!layout.empty()) out << "layout:  " << layout << "\n";
  if (!classes.empty()) {
    out << "images:  " << total_images << " in " << classes.size() << (classes.size() == 1 ? " class" : " classes")
        << " (train " << train_images << ", validation " << validation_images << ": " << validation << ")\n";
    size_t width = 5;
    for (const auto& c : classes) width = std::max(width, display_width(c.name));
    out << "\n  "
        << "class" << std::string(width - 5, ' ') << "   images    train      val\n";
    for (const auto& c : classes) {
      char counts[64];
      std::snprintf(counts, sizeof counts, " %8lld %8lld %8lld", static_cast<long long>(c.images),
                    static_cast<long long>(c.train), static_cast<long long>(c.validation));
      out << "  " << c.name << std::string(width - display_width(c.name), ' ') << counts << "\n";
    }
    out << "\n";
    if (min_width == max_width && min_height == max_height) {
      out << "image size: " << min_width << " x " << min_height << " pixels, all images\n";
    } else {
      out << "image sizes: width " << min_width << " to " << max_width << ", height " << min_height << " to "
          << max_height << " pixels; median shorter side " << median_shorter_side << "\n";
    }
    char ratio[32];
    std::snprintf(ratio, sizeof ratio, "%.2f", imbalance);
    if (imbalance == 1.0) {
      out << "class imbalance: none (every class has " << classes.front().images << " images)\n";
    } else {
      out << "class imbalance: " << ratio << " (largest '" << largest_class << "', smallest '" << smallest_class << "')"
          << (imbalance >= 3 ? ": consider class weights or resampling" : "") << "\n";
    }
  }
  if (!empty_classes.empty()) out << "empty classes (not used): " << quoted_list(empty_classes) << "\n";
  for (const auto& s : small_classes) out << "too small for the split: '" << s.name << "': " << s.reason << "\n";
  for (const auto& n : notes) out << "note: " << n << "\n";
  if (!skipped.empty()) {
    std::map<std::string, int> by_reason;
    for (const auto& s : skipped) ++by_reason[s.reason];
    out << "skipped " << skipped.size() << (skipped.size() == 1 ? " file or folder" : " files or folders") << ":\n";
    for (size_t i = 0; i < skipped.size() && i < kSkippedShown; ++i)
      out << "  " << skipped[i].path << ": " << skipped[i].reason << "\n";
    if (skipped.size() > kSkippedShown) {
      out << "  ... and " << skipped.size() - kSkippedShown
          << " more (the JSON report lists all of them); by reason:\n";
      for (const auto& [reason, n] : by_reason) out << "    " << n << " x " << reason << "\n";
    }
  }
  if (!fingerprint.empty() && trainable()) out << "fingerprint: " << fingerprint << "\n";
  for (const auto& e : errors) out << "error: " << e << "\n";
  if (trainable()) out << "trainable: yes\n";
  return out.str();
}

nlohmann::json DatasetReport::to_json() const {
  using nlohmann::json;
  json j;
  j["root"] = root;
  j["layout"] = layout;
  j["trainable"] = trainable();
  j["errors"] = errors;
  j["validation"] = validation;
  j["classes"] = classes;
  j["skipped"] = skipped;
  j["empty_classes"] = empty_classes;
  j["small_classes"] = small_classes;
  j["total_images"] = total_images;
  j["train_images"] = train_images;
  j["validation_images"] = validation_images;
  j["train_images_before_limit"] = train_images_before_limit;
  j["validation_images_before_limit"] = validation_images_before_limit;
  j["image_sizes"] = {{"min_width", min_width},
                      {"max_width", max_width},
                      {"min_height", min_height},
                      {"max_height", max_height},
                      {"median_shorter_side", median_shorter_side}};
  j["imbalance"] = {{"ratio", imbalance}, {"largest", largest_class}, {"smallest", smallest_class}};
  j["notes"] = notes;
  j["fingerprint"] = fingerprint;
  return j;
}

}  // namespace ampwb
