// Real image folders written at test time.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <string>

#include "core/rng.h"

namespace ampwb {
namespace fs = std::filesystem;

// Two classes any model can separate: horizontal and vertical stripes, random phase and noise.
inline fs::path make_stripes_folder(const std::string& name, int per_class, int size) {
  const fs::path root = fs::temp_directory_path() / ("ampwb_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(root);
  Rng rng(5);
  for (const char* cls : {"horizontal stripes", "vertical stripes"}) {
    fs::create_directories(root / cls);
    for (int i = 0; i < per_class; ++i) {
      cv::Mat img(size, size, CV_8UC3);
      const int phase = static_cast<int>(rng.below(4));
      for (int y = 0; y < size; ++y)
        for (int x = 0; x < size; ++x) {
          const int coord = cls[0] == 'h' ? y : x;
          const int base = ((coord + phase) / 2) % 2 ? 200 : 50;
          for (int c = 0; c < 3; ++c)
            img.at<cv::Vec3b>(y, x)[c] =
                static_cast<uint8_t>(std::clamp(base + static_cast<int>(rng.normal() * 30), 0, 255));
        }
      cv::imwrite((root / cls / (std::to_string(i) + ".png")).string(), img);
    }
  }
  return root;
}

}  // namespace ampwb
