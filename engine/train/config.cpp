// Training configuration: precision presets, validation and JSON.
#include "train/config.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <type_traits>

#include "core/error.h"

namespace ampwb {

// A refused setting: the message is for the user, so it carries no source location (unlike AMPWB_CHECK's).
#define REQUIRE_SETTING(cond, msg) \
  do {                             \
    if (!(cond)) {                 \
      std::ostringstream message;  \
      message << msg;              \
      throw Error(message.str());  \
    }                              \
  } while (0)

void validate(const TrainConfig& c) {
  REQUIRE_SETTING(!c.data_dir.empty(), "no dataset folder given (--data DIR)");
  const std::vector<int> depths = supported_depths();
  REQUIRE_SETTING(std::find(depths.begin(), depths.end(), c.depth) != depths.end(),
                  "unsupported depth " << c.depth << " (expected 18, 34, 50, 101, 152, 20, 32, 44, 56 or 110)");
  REQUIRE_SETTING(c.epochs >= 1, "--epochs must be at least 1, got " << c.epochs);
  REQUIRE_SETTING(c.batch_size >= 2,
                  "--batch-size must be at least 2 (batch norm needs two samples), got " << c.batch_size);
  REQUIRE_SETTING(c.image_size == 0 || (c.image_size >= 8 && c.image_size <= 1024),
                  "--image-size must be between 8 and 1024, got " << c.image_size);
  REQUIRE_SETTING(c.lr > 0 && std::isfinite(c.lr), "--lr must be positive, got " << c.lr);
  REQUIRE_SETTING(c.warmup_epochs >= 0 && c.warmup_epochs <= c.epochs, "--warmup-epochs must be in [0, epochs]");
  REQUIRE_SETTING(c.label_smoothing >= 0 && c.label_smoothing < 1, "--label-smoothing must be in [0, 1)");
  REQUIRE_SETTING(c.grad_clip_norm >= 0, "--grad-clip must not be negative");
  REQUIRE_SETTING(c.data.validation_fraction >= 0 && c.data.validation_fraction < 1,
                  "--val-fraction must be in [0, 1)");
  REQUIRE_SETTING(c.topk >= 1, "--topk must be at least 1");
  REQUIRE_SETTING(c.optimizer.kind == "sgd" || c.optimizer.kind == "adam" || c.optimizer.kind == "adamw",
                  "unknown optimizer '" << c.optimizer.kind << "' (expected sgd, adam or adamw)");
  REQUIRE_SETTING(c.schedule == "constant" || c.schedule == "step" || c.schedule == "cosine",
                  "unknown schedule '" << c.schedule << "' (expected constant, step or cosine)");
  REQUIRE_SETTING(c.threads >= 0, "--threads must not be negative");
  REQUIRE_SETTING(c.data.normalization == "dataset" || c.data.normalization == "imagenet",
                  "--normalize must be dataset or imagenet");
  const LossScaleConfig& s = c.precision.loss_scale;
  REQUIRE_SETTING(s.kind == "off" || s.kind == "static" || s.kind == "dynamic",
                  "--loss-scale must be off, static:S or dynamic, got '" << s.kind << "'");
  REQUIRE_SETTING(s.init_scale > 0 && std::isfinite(s.init_scale), "the loss scale must be positive and finite");
  REQUIRE_SETTING(s.growth_factor > 1, "--growth-factor must be above 1");
  REQUIRE_SETTING(s.backoff_factor > 0 && s.backoff_factor < 1, "--backoff-factor must be in (0, 1)");
  REQUIRE_SETTING(s.growth_interval >= 1, "--growth-interval must be at least 1");
  REQUIRE_SETTING(s.hysteresis >= 1, "--hysteresis must be at least 1");
  REQUIRE_SETTING(s.min_scale >= 0 && s.max_scale >= 0 && (s.max_scale == 0 || s.max_scale >= s.min_scale),
                  "--min-scale and --max-scale must be non-negative, the maximum not below the minimum");
  REQUIRE_SETTING(c.max_consecutive_skipped >= 1, "--max-skipped must be at least 1");
  REQUIRE_SETTING(c.data.cache_budget_mb >= 0, "--cache-mb must not be negative, got " << c.data.cache_budget_mb);
  REQUIRE_SETTING(c.data.max_train_images >= 0,
                  "--max-train-images must not be negative (0 means all), got " << c.data.max_train_images);
  REQUIRE_SETTING(c.max_steps_per_epoch >= 0, "--max-steps-per-epoch must not be negative (0 means all)");
  REQUIRE_SETTING(c.data.loader_threads >= 0, "the loader's thread count must not be negative");
}

void validate_for_data(const TrainConfig& c, int64_t classes, int64_t train_images) {
  REQUIRE_SETTING(c.topk <= classes, "--topk " << c.topk << " is more than the dataset's " << classes
                                               << " classes (its top-k accuracy would always be 100%)");
  REQUIRE_SETTING(c.batch_size <= train_images, "--batch-size " << c.batch_size
                                                                << " is larger than the training split ("
                                                                << train_images << " images)");
}

#undef REQUIRE_SETTING

void to_json(nlohmann::json& j, const TrainConfig& c) {
  const LossScaleConfig& s = c.precision.loss_scale;
  j = nlohmann::json{
      {"name", c.name},
      {"data_dir", c.data_dir},
      {"depth", c.depth},
      {"epochs", c.epochs},
      {"batch_size", c.batch_size},
      {"image_size", c.image_size},
      {"stem", stem_name(c.stem)},
      {"lr", c.lr},
      {"schedule", c.schedule},
      {"warmup_epochs", c.warmup_epochs},
      {"optimizer",
       {{"kind", c.optimizer.kind},
        {"momentum", c.optimizer.momentum},
        {"nesterov", c.optimizer.nesterov},
        {"weight_decay", c.optimizer.weight_decay},
        {"beta1", c.optimizer.beta1},
        {"beta2", c.optimizer.beta2},
        {"eps", c.optimizer.eps}}},
      {"label_smoothing", c.label_smoothing},
      {"grad_clip_norm", c.grad_clip_norm},
      {"topk", c.topk},
      {"seed", c.seed},
      {"device", c.device},
      {"threads", c.threads},
      {"precision",
       {{"mode", mode_name(c.precision.mode)},
        {"master_weights", c.precision.master_weights},
        {"loss_scale",
         {{"kind", s.kind},
          {"init_scale", s.init_scale},
          {"growth_factor", s.growth_factor},
          {"backoff_factor", s.backoff_factor},
          {"growth_interval", s.growth_interval},
          {"hysteresis", s.hysteresis},
          {"min_scale", s.min_scale},
          {"max_scale", s.max_scale}}}}},
      {"data",
       {{"validation_fraction", c.data.validation_fraction},
        {"max_train_images", c.data.max_train_images},
        {"augment", c.data.augment},
        {"normalization", c.data.normalization},
        {"drop_last", c.data.drop_last},
        {"cache_budget_mb", c.data.cache_budget_mb},
        {"loader_threads", c.data.loader_threads}}},
      {"max_steps_per_epoch", c.max_steps_per_epoch},
      {"max_consecutive_skipped", c.max_consecutive_skipped},
      {"checkpoint_dir", c.checkpoint_dir},
  };
}

// Missing keys keep their defaults, so configurations stored by older versions still load. An integer field
// takes only an integer that fits: nlohmann converts 7e30 to int by a cast whose result is undefined (found by
// scripts/fuzz.sh, fuzz_store_record), so a damaged or hand-edited store must be refused by name instead.
template <class T>
void read(const nlohmann::json& j, const char* key, T& field) {
  if (!j.contains(key)) return;
  const nlohmann::json& v = j.at(key);
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    const bool fits = v.is_number_integer() &&
                      (v.is_number_unsigned() ? v.get<uint64_t>() <= uint64_t(std::numeric_limits<T>::max())
                                              : v.get<int64_t>() >= int64_t(std::numeric_limits<T>::min()) &&
                                                    v.get<int64_t>() <= int64_t(std::numeric_limits<T>::max()));
    if (!fits)
      throw Error(std::string("the stored configuration's ") + key + " is not a whole number in range: " + v.dump());
  } else if constexpr (std::is_floating_point_v<T>) {
    const bool fits = v.is_number() && (!std::is_same_v<T, float> || !(std::fabs(v.get<double>()) > 3.4e38));
    if (!fits) throw Error(std::string("the stored configuration's ") + key + " is not a number in range: " + v.dump());
  }
  v.get_to(field);
}

void from_json(const nlohmann::json& j, TrainConfig& c) {
  read(j, "name", c.name);
  read(j, "data_dir", c.data_dir);
  read(j, "depth", c.depth);
  read(j, "epochs", c.epochs);
  read(j, "batch_size", c.batch_size);
  read(j, "image_size", c.image_size);
  std::string stem = stem_name(c.stem);
  read(j, "stem", stem);
  c.stem = stem == "imagenet" ? Stem::ImageNet : stem == "small" ? Stem::Small : Stem::Auto;
  read(j, "lr", c.lr);
  read(j, "schedule", c.schedule);
  read(j, "warmup_epochs", c.warmup_epochs);
  const nlohmann::json empty = nlohmann::json::object();
  const auto& o = j.contains("optimizer") ? j.at("optimizer") : empty;
  read(o, "kind", c.optimizer.kind);
  read(o, "momentum", c.optimizer.momentum);
  read(o, "nesterov", c.optimizer.nesterov);
  read(o, "weight_decay", c.optimizer.weight_decay);
  read(o, "beta1", c.optimizer.beta1);
  read(o, "beta2", c.optimizer.beta2);
  read(o, "eps", c.optimizer.eps);
  read(j, "label_smoothing", c.label_smoothing);
  read(j, "grad_clip_norm", c.grad_clip_norm);
  read(j, "topk", c.topk);
  read(j, "seed", c.seed);
  read(j, "device", c.device);
  read(j, "threads", c.threads);
  const auto& p = j.contains("precision") ? j.at("precision") : empty;
  std::string mode = mode_name(c.precision.mode);
  read(p, "mode", mode);
  c.precision.mode = parse_precision_mode(mode);
  read(p, "master_weights", c.precision.master_weights);
  const auto& s = p.contains("loss_scale") ? p.at("loss_scale") : empty;
  LossScaleConfig& l = c.precision.loss_scale;
  read(s, "kind", l.kind);
  read(s, "init_scale", l.init_scale);
  read(s, "growth_factor", l.growth_factor);
  read(s, "backoff_factor", l.backoff_factor);
  read(s, "growth_interval", l.growth_interval);
  read(s, "hysteresis", l.hysteresis);
  read(s, "min_scale", l.min_scale);
  read(s, "max_scale", l.max_scale);
  const auto& d = j.contains("data") ? j.at("data") : empty;
  read(d, "validation_fraction", c.data.validation_fraction);
  read(d, "max_train_images", c.data.max_train_images);
  read(d, "augment", c.data.augment);
  read(d, "normalization", c.data.normalization);
  read(d, "drop_last", c.data.drop_last);
  read(d, "cache_budget_mb", c.data.cache_budget_mb);
  read(d, "loader_threads", c.data.loader_threads);
  read(j, "max_steps_per_epoch", c.max_steps_per_epoch);
  read(j, "max_consecutive_skipped", c.max_consecutive_skipped);
  read(j, "checkpoint_dir", c.checkpoint_dir);
}

}  // namespace ampwb
