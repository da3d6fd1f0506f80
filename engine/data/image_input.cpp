// Image files prepared as validation images are.
#include "data/image_input.h"

#include <algorithm>
#include <filesystem>

#include <opencv2/core.hpp>

#include "core/error.h"
#include "core/parallel_for.h"
#include "data/image_file.h"
#include "data/transforms.h"

namespace ampwb {
namespace {

// As detail::load_bgr for a file of a dataset: the same JPEG reduction for the same shorter side.
cv::Mat decode_file(const std::string& path, int size) {
  std::vector<uint8_t> bytes;
  std::string reason;
  if (!read_file(path, bytes, reason)) {
    if (std::error_code ec; !std::filesystem::exists(path, ec)) throw Error("'" + path + "' does not exist");
    throw Error("cannot read image '" + path + "': " + reason);
  }
  const ImageCheck check = check_image(bytes.data(), bytes.size());
  if (!check.ok) throw Error("'" + path + "' is not an image that can be read: " + check.reason);
  int reduce = 1;
  if (check.format == ImageFormat::Jpeg && check.width > 0) {
    const int shorter = std::min(check.width, check.height);
    for (int r : {8, 4, 2})
      if ((shorter + r - 1) / r >= size) {
        reduce = r;
        break;
      }
  }
  cv::Mat decoded = decode_bgr8(bytes.data(), bytes.size(), reduce);
  if (decoded.empty()) throw Error("'" + path + "' does not decode as an image");
  return decoded;
}

}  // namespace

PreparedImages prepare_image_files(const std::vector<std::string>& paths, int size, const Normalization& normalization,
                                   int threads) {
  const int64_t n = static_cast<int64_t>(paths.size()), S = size;
  PreparedImages images{Tensor::zeros({n, 3, S, S}, DType::F32, Layout::NHWC), std::vector<std::string>(paths.size())};
  const detail::NormalizeTable table(normalization);
  float* out = images.batch.data_as<float>();
  parallel_for(static_cast<size_t>(n), threads, [&](size_t i, int) {
    try {
      const cv::Mat square = detail::center_square(decode_file(paths[i], size), size);
      detail::write_normalized(square, size, 0, 0, false, table, DType::F32, out + static_cast<int64_t>(i) * S * S * 3);
    } catch (const Error& e) {
      images.unreadable[i] = e.what();
    } catch (const cv::Exception& e) {  // a file OpenCV's decoder fails on
      images.unreadable[i] = "'" + paths[i] + "' does not decode as an image: " + e.msg;
    }
  });
  return images;
}

std::vector<std::string> image_files_in(const std::vector<std::string>& paths, std::vector<std::string>* left_out) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  for (const std::string& path : paths) {
    std::error_code ec;
    if (fs::is_directory(path, ec)) {
      std::vector<std::string> found, others;
      for (fs::recursive_directory_iterator it(path, fs::directory_options::skip_permission_denied, ec), end;
           !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        std::error_code kind;
        // A link to nowhere with an image's name is an image the user meant: named with its reason in its row.
        const bool dangling_image = it->is_symlink(kind) && !it->exists(kind) && has_image_extension(name);
        if (!it->is_regular_file(kind) && !dangling_image) continue;
        if (has_image_extension(name))
          found.push_back(it->path().string());
        else if (!name.starts_with('.'))
          others.push_back(it->path().string());
      }
      if (ec) throw Error("cannot list the folder '" + path + "': " + ec.message());
      std::sort(found.begin(), found.end());  // in path order, whatever order the file system lists them in
      std::sort(others.begin(), others.end());
      if (found.empty()) {
        const bool gifs =
            std::any_of(others.begin(), others.end(), [](const std::string& f) { return is_gif_name(f); });
        throw Error("the folder '" + path + "' holds no image files" +
                    (others.empty() ? std::string()
                                    : " (" + std::to_string(others.size()) +
                                          (others.size() == 1 ? " other file, '" : " other files, such as '") +
                                          fs::path(others.front()).filename().string() + "'" +
                                          (gifs ? "; GIFs are not read: convert them to PNG" : "") + ")"));
      }
      files.insert(files.end(), found.begin(), found.end());
      if (left_out) left_out->insert(left_out->end(), others.begin(), others.end());
    } else {
      files.push_back(path);  // a missing one too: named with its reason in its row, the others classified
    }
  }
  return files;
}

}  // namespace ampwb
