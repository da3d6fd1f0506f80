// ampwb predict: a stored run's final weights on image files, with the run's own preprocessing.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "core/float_decimal.h"
#include "data/image_file.h"
#include "data/image_input.h"
#include "store/final_weights.h"
#include "store/run_store.h"
#include "train/predictor.h"

namespace ampwb::cli {
namespace {

struct PredictOptions {
  std::string run, db;
  std::vector<std::string> images;
  int top = 5;
  int batch_size = 32;
  int threads = 0;
  DeviceChoice device = DeviceChoice::cpu();
  bool json = false;
};

// One image's result as --json lists it: its top k classes and its logits, or why it could not be read.
nlohmann::json prediction_json(const std::string& image, const ImageLogits& result,
                               const std::vector<std::string>& classes, int k) {
  if (!result.unreadable.empty()) return {{"image", image}, {"error", result.unreadable}};
  const std::vector<double> p = softmax(result.logits);
  const std::vector<int> top = top_classes(result.logits, k);
  nlohmann::json entry = {{"image", image}, {"class", classes.at(top.at(0))}, {"top", nlohmann::json::array()}};
  for (int c : top) entry["top"].push_back({{"class", classes.at(c)}, {"probability", p.at(c)}});
  entry["logits"] = nlohmann::json::array();
  for (float logit : result.logits) entry["logits"].push_back(float_as_decimal(logit));
  return entry;
}

// The same for people: the image, then its top k classes with their probabilities, or the reason.
void print_prediction(const std::string& image, const ImageLogits& result, const std::vector<std::string>& classes,
                      int k) {
  std::printf("%s\n", printable(image).c_str());
  if (!result.unreadable.empty()) {
    std::printf("  not classified: %s\n", printable(result.unreadable).c_str());
    return;
  }
  const std::vector<double> p = softmax(result.logits);
  for (int c : top_classes(result.logits, k))
    std::printf("  %7.3f %%  %s\n", 100.0 * p.at(c), printable(classes.at(c)).c_str());
}

int predict_command(const PredictOptions& options) {
  const RunStore store(store_path(options.db), RunStore::Mode::ReadOnly);
  const int64_t run = store.resolve(options.run);
  // The images are listed (and a missing one named) before the network is built.
  std::vector<std::string> left_out;
  const std::vector<std::string> images = image_files_in(options.images, &left_out);
  if (!left_out.empty()) {  // said, so that a folder's GIFs or notes are not taken for classified
    constexpr size_t kNamed = 5;
    std::string named;
    for (size_t i = 0; i < std::min(kNamed, left_out.size()); ++i) {
      named += (i ? ", " : "") + printable(left_out[i]);
      if (is_gif_name(left_out[i])) named += " (a GIF: convert it to PNG)";
    }
    if (left_out.size() > kNamed) named += " and " + std::to_string(left_out.size() - kNamed) + " more";
    std::fprintf(
        stderr, "ampwb predict: left out %zu %s: %s\n", left_out.size(),
        left_out.size() == 1 ? "file that is not an image by its name" : "files that are not images by their names",
        named.c_str());
  }
  ImagePredictor predictor(load_final_weights(store, run), options.device, options.threads);
  const std::vector<std::string>& classes = predictor.weights().preprocessing.class_names;
  const int k = std::min<int>(options.top, static_cast<int>(classes.size()));
  const bool show_progress = options.json && ::isatty(STDERR_FILENO) == 1;  // the JSON comes only at the end
  nlohmann::json list = nlohmann::json::array();
  size_t unreadable = 0;
  // A batch at a time, each printed as soon as it is classified: a folder of thousands takes minutes.
  {
    // The progress line ends before anything else is said, an error on the way out included.
    struct EndProgressLine {
      bool on;
      ~EndProgressLine() {
        if (on) std::fprintf(stderr, "\n");
      }
    } end_progress{show_progress};
    const auto batch = static_cast<size_t>(options.batch_size);
    for (size_t begin = 0; begin < images.size(); begin += batch) {
      const size_t end = std::min(images.size(), begin + batch);
      const std::vector<ImageLogits> results = predictor.logits(
          {images.begin() + static_cast<std::ptrdiff_t>(begin), images.begin() + static_cast<std::ptrdiff_t>(end)},
          options.batch_size);
      for (size_t i = begin; i < end; ++i) {
        const ImageLogits& result = results[i - begin];
        unreadable += result.unreadable.empty() ? 0 : 1;
        if (options.json)
          list.push_back(prediction_json(images[i], result, classes, k));
        else
          print_prediction(images[i], result, classes, k);
      }
      std::fflush(stdout);
      if (show_progress) std::fprintf(stderr, "\rclassified %zu of %zu images", end, images.size());
    }
  }
  if (options.json) print_json(list);
  if (unreadable == 0) return 0;
  std::fflush(stdout);
  const char* where = options.json ? "in its \"error\"" : "above";
  if (images.size() == 1)
    std::fprintf(stderr, "ampwb predict: error: the image could not be read (it says why %s)\n", where);
  else
    std::fprintf(stderr, "ampwb predict: error: %zu of %zu images could not be read (each says why %s)\n", unreadable,
                 images.size(), where);
  return 1;
}

}  // namespace

void add_predict_command(CLI::App& app, Invocation& invocation) {
  auto options = std::make_shared<PredictOptions>();
  CLI::App* predict = app.add_subcommand(
      "predict",
      "classify images with a finished run's final weights: the run's preprocessing, then the network in "
      "FP32 (batch norm on its running statistics)");
  predict->add_option("RUN", options->run, "a run id or a unique run name")->type_name("")->required();
  predict->add_option("IMAGE", options->images, "image files, or folders (every image file under one, in sorted order)")
      ->type_name("")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->required();
  add_number(predict, "--top", options->top, "how many classes to show for each image, most likely first")
      ->check(CLI::Range(1, 1000000).description(""));
  add_number(predict, "--batch-size", options->batch_size, "images through the network at once")
      ->check(CLI::Range(1, 4096).description(""));
  add_number(predict, "--threads", options->threads, "CPU threads (0: all cores)")
      ->check(CLI::Range(0, 4096).description(""));
  add_named_value(predict, "--device", options->device, "where the network runs");
  predict->add_flag("--json", options->json,
                    "a JSON list, one object per image: image, class (the top one), top [{class, probability}], "
                    "logits; or image and error for a file that could not be read");
  add_db_option(predict, options->db);
  run_on_parse(predict, invocation, options, predict_command);
}

}  // namespace ampwb::cli
