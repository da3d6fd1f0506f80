// Training configuration: validation and JSON (from the field lists in config.h).
#include "train/config.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "data/loader.h"
#include "train/record_json.h"

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
  REQUIRE_SETTING(c.lr > 0 && std::isfinite(c.lr), "--lr must be a positive number, got " << c.lr);
  REQUIRE_SETTING(c.warmup_epochs >= 0 && c.warmup_epochs <= c.epochs, "--warmup-epochs must be in [0, epochs]");
  REQUIRE_SETTING(c.label_smoothing >= 0 && c.label_smoothing < 1, "--label-smoothing must be in [0, 1)");
  REQUIRE_SETTING(c.grad_clip_norm >= 0 && std::isfinite(c.grad_clip_norm),
                  "--grad-clip must be a finite number, not negative (0: off), got " << c.grad_clip_norm);
  REQUIRE_SETTING(c.data.validation_fraction >= 0 && c.data.validation_fraction < 1,
                  "--val-fraction must be in [0, 1)");
  REQUIRE_SETTING(c.topk >= 1, "--topk must be at least 1");
  // PyTorch's own checks, and a momentum of 1 or more, which never forgets a gradient and diverges.
  const OptimizerConfig& o = c.optimizer;
  REQUIRE_SETTING(o.momentum >= 0 && o.momentum < 1, "--momentum must be in [0, 1), got " << o.momentum);
  REQUIRE_SETTING(!o.nesterov || o.kind != OptimizerKind::Sgd || o.momentum > 0,
                  "--nesterov needs a momentum above 0");
  REQUIRE_SETTING(o.weight_decay >= 0 && std::isfinite(o.weight_decay),
                  "--weight-decay must be a finite number, not negative, got " << o.weight_decay);
  REQUIRE_SETTING(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1,
                  "Adam's betas must be in [0, 1), got " << o.beta1 << " and " << o.beta2);
  REQUIRE_SETTING(o.eps > 0 && std::isfinite(o.eps), "Adam's eps must be positive and finite, got " << o.eps);
  REQUIRE_SETTING(c.threads >= 0 && c.threads <= kMaxThreads,
                  "--threads must be 0 (every core) to " << kMaxThreads << ", got " << c.threads);
  REQUIRE_SETTING(c.cuda_graphs != CudaGraphs::On || c.host_sync != HostSync::EveryStep,
                  "--cuda-graphs on captures deferred steps: it needs --host-sync auto or deferred");
  const LossScaleConfig& s = c.precision.loss_scale;
  REQUIRE_SETTING(s.init_scale > 0 && std::isfinite(s.init_scale), "the loss scale must be positive and finite");
  REQUIRE_SETTING(s.growth_factor > 1 && std::isfinite(s.growth_factor),
                  "--growth-factor must be a finite number above 1, got " << s.growth_factor);
  REQUIRE_SETTING(s.backoff_factor > 0 && s.backoff_factor < 1, "--backoff-factor must be in (0, 1)");
  REQUIRE_SETTING(s.growth_interval >= 1, "--growth-interval must be at least 1");
  REQUIRE_SETTING(s.hysteresis >= 1, "--hysteresis must be at least 1");
  REQUIRE_SETTING(s.min_scale >= 0 && s.max_scale >= 0 && std::isfinite(s.min_scale) && std::isfinite(s.max_scale) &&
                      (s.max_scale == 0 || s.max_scale >= s.min_scale),
                  "--min-scale and --max-scale must be finite and non-negative (0: none), the maximum not below the "
                  "minimum");
  REQUIRE_SETTING(c.max_consecutive_skipped >= 1, "--max-skipped must be at least 1");
  REQUIRE_SETTING(c.data.cache_budget_mb >= 0, "--cache-mb must not be negative, got " << c.data.cache_budget_mb);
  REQUIRE_SETTING(c.data.max_train_images >= 0,
                  "--max-train-images must not be negative (0 means all), got " << c.data.max_train_images);
  REQUIRE_SETTING(c.data.max_validation_images >= 0,
                  "--max-val-images must not be negative (0 means all), got " << c.data.max_validation_images);
  REQUIRE_SETTING(c.numerics_every >= 0,
                  "--numerics-every must not be negative (0: the last step of each epoch), got " << c.numerics_every);
  REQUIRE_SETTING(c.max_steps_per_epoch >= 0, "--max-steps-per-epoch must not be negative (0 means all)");
  REQUIRE_SETTING(c.data.loader_threads >= 0 && c.data.loader_threads <= kMaxLoaderThreads,
                  "the loader's thread count must be 0 (the training threads) to " << kMaxLoaderThreads << ", got "
                                                                                   << c.data.loader_threads);
}

void validate_for_data(const TrainConfig& c, int64_t classes, int64_t train_images) {
  REQUIRE_SETTING(c.topk <= classes, "--topk " << c.topk << " is more than the dataset's " << classes
                                               << " classes (its top-k accuracy would always be 100%)");
  REQUIRE_SETTING(c.batch_size <= train_images, "--batch-size " << c.batch_size
                                                                << " is larger than the training split ("
                                                                << train_images << " images)");
}

#undef REQUIRE_SETTING

void to_json(nlohmann::json& j, const TrainConfig& c) { write_fields(j, c); }

void from_json(const nlohmann::json& j, TrainConfig& c) {
  read_fields(j, c, "configuration");
  // Stored before the setting existed: that run validated on every image, whatever today's default.
  const auto data = j.find("data");
  if (data == j.end() || !data->is_object() || !data->contains("max_validation_images"))
    c.data.max_validation_images = 0;
}

void to_json(nlohmann::json& j, const Stem& stem) { j = stem_name(stem); }

void from_json(const nlohmann::json& j, Stem& stem) {
  const std::string name = j.get<std::string>();
  stem = name == "imagenet" ? Stem::ImageNet : name == "small" ? Stem::Small : Stem::Auto;
}

void to_json(nlohmann::json& j, const PrecisionMode& mode) { j = mode_name(mode); }

void from_json(const nlohmann::json& j, PrecisionMode& mode) { mode = parse_precision_mode(j.get<std::string>()); }

std::vector<std::pair<std::string, std::string>> config_settings(const TrainConfig& c) {
  std::vector<std::pair<std::string, std::string>> out;
  flat_fields(c, out);
  return out;
}

std::string config_to_json_text(const TrainConfig& c) { return nlohmann::json(c).dump(); }

TrainConfig config_from_json_text(const std::string& text, TrainConfig base) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) throw Error("the stored configuration is not JSON");
  from_json(j, base);
  return base;
}

}  // namespace ampwb
