// Training configuration: validation and JSON (from the field lists in config.h).
#include "train/config.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/setting_error.h"
#include "data/loader.h"
#include "train/record_json.h"

namespace ampwb {

// A refused setting, named by its config_settings key: the message is for the user, in neutral words (each front
// end names the setting its own way), so it carries no source location (unlike AMPWB_CHECK's).
#define REQUIRE_SETTING(cond, key, msg)         \
  do {                                          \
    if (!(cond)) {                              \
      std::ostringstream message;               \
      message << msg;                           \
      throw SettingError((key), message.str()); \
    }                                           \
  } while (0)

void validate(const TrainConfig& c) {
  REQUIRE_SETTING(!c.data_dir.empty(), "data_dir", "no dataset folder given");
  const std::vector<int> depths = supported_depths();
  REQUIRE_SETTING(std::find(depths.begin(), depths.end(), c.depth) != depths.end(), "depth",
                  "unsupported depth " << c.depth << " (expected 18, 34, 50, 101, 152, 20, 32, 44, 56 or 110)");
  REQUIRE_SETTING(c.epochs >= 1, "epochs", "the number of epochs must be at least 1, got " << c.epochs);
  REQUIRE_SETTING(c.batch_size >= 2, "batch_size",
                  "the batch size must be at least 2 (batch norm needs two samples), got " << c.batch_size);
  REQUIRE_SETTING(c.image_size == 0 || (c.image_size >= 8 && c.image_size <= 1024), "image_size",
                  "the image size must be between 8 and 1024, got " << c.image_size);
  REQUIRE_SETTING(c.lr > 0 && std::isfinite(c.lr), "lr", "the learning rate must be a positive number, got " << c.lr);
  REQUIRE_SETTING(c.warmup_epochs >= 0 && c.warmup_epochs <= c.epochs, "warmup_epochs",
                  "the warm-up epochs must be in [0, epochs], got " << c.warmup_epochs << " of " << c.epochs);
  REQUIRE_SETTING(c.label_smoothing >= 0 && c.label_smoothing < 1, "label_smoothing",
                  "the label smoothing must be in [0, 1), got " << c.label_smoothing);
  REQUIRE_SETTING(
      c.grad_clip_norm >= 0 && std::isfinite(c.grad_clip_norm), "grad_clip_norm",
      "the gradient clipping norm must be a finite number, not negative (0: off), got " << c.grad_clip_norm);
  REQUIRE_SETTING(c.data.validation_fraction >= 0 && c.data.validation_fraction < 1, "data.validation_fraction",
                  "the validation fraction must be in [0, 1), got " << c.data.validation_fraction);
  REQUIRE_SETTING(c.topk >= 1, "topk", "top-k must be at least 1, got " << c.topk);
  // PyTorch's own checks, and a momentum of 1 or more, which never forgets a gradient and diverges.
  const OptimizerConfig& o = c.optimizer;
  REQUIRE_SETTING(o.momentum >= 0 && o.momentum < 1, "optimizer.momentum",
                  "the momentum must be in [0, 1), got " << o.momentum);
  REQUIRE_SETTING(!o.nesterov || o.kind != OptimizerKind::Sgd || o.momentum > 0, "optimizer.nesterov",
                  "Nesterov momentum needs a momentum above 0");
  REQUIRE_SETTING(o.weight_decay >= 0 && std::isfinite(o.weight_decay), "optimizer.weight_decay",
                  "the weight decay must be a finite number, not negative, got " << o.weight_decay);
  REQUIRE_SETTING(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1,
                  o.beta1 >= 0 && o.beta1 < 1 ? "optimizer.beta2" : "optimizer.beta1",
                  "Adam's betas must be in [0, 1), got " << o.beta1 << " and " << o.beta2);
  REQUIRE_SETTING(o.eps > 0 && std::isfinite(o.eps), "optimizer.eps",
                  "Adam's eps must be positive and finite, got " << o.eps);
  REQUIRE_SETTING(c.threads >= 0 && c.threads <= kMaxThreads, "threads",
                  "the thread count must be 0 (every core) to " << kMaxThreads << ", got " << c.threads);
  REQUIRE_SETTING(c.cuda_graphs != CudaGraphs::On || c.host_sync != HostSync::EveryStep, "cuda_graphs",
                  "CUDA graphs on captures deferred steps: it needs the host sync auto or deferred");
  const LossScaleConfig& s = c.precision.loss_scale;
  REQUIRE_SETTING(s.init_scale > 0 && std::isfinite(s.init_scale), "precision.loss_scale.init_scale",
                  "the loss scale must be positive and finite, got " << s.init_scale);
  REQUIRE_SETTING(s.growth_factor > 1 && std::isfinite(s.growth_factor), "precision.loss_scale.growth_factor",
                  "the loss scale's growth factor must be a finite number above 1, got " << s.growth_factor);
  REQUIRE_SETTING(s.backoff_factor > 0 && s.backoff_factor < 1, "precision.loss_scale.backoff_factor",
                  "the loss scale's backoff factor must be in (0, 1), got " << s.backoff_factor);
  REQUIRE_SETTING(s.growth_interval >= 1, "precision.loss_scale.growth_interval",
                  "the loss scale's growth interval must be at least 1, got " << s.growth_interval);
  REQUIRE_SETTING(s.hysteresis >= 1, "precision.loss_scale.hysteresis",
                  "the loss scale's hysteresis must be at least 1, got " << s.hysteresis);
  REQUIRE_SETTING(s.min_scale >= 0 && s.max_scale >= 0 && std::isfinite(s.min_scale) && std::isfinite(s.max_scale) &&
                      (s.max_scale == 0 || s.max_scale >= s.min_scale),
                  s.min_scale >= 0 && std::isfinite(s.min_scale) ? "precision.loss_scale.max_scale"
                                                                 : "precision.loss_scale.min_scale",
                  "the loss scale's minimum and maximum must be finite and non-negative (0: none), the maximum not "
                  "below the minimum, got "
                      << s.min_scale << " and " << s.max_scale);
  const DelayedScalingSettings& fp8 = c.precision.fp8.scaling;
  REQUIRE_SETTING(fp8.history_length >= 1 && fp8.history_length <= 1'000'000, "precision.fp8.amax_history_length",
                  "the FP8 amax history must keep between 1 and 1000000 steps, got " << fp8.history_length);
  REQUIRE_SETTING(fp8.margin >= -64 && fp8.margin <= 64, "precision.fp8.margin",
                  "the FP8 scaling margin must be between -64 and 64 powers of two, got " << fp8.margin);
  REQUIRE_SETTING(c.max_consecutive_skipped >= 1, "max_consecutive_skipped",
                  "the skipped steps in a row that stop a run must be at least 1, got " << c.max_consecutive_skipped);
  REQUIRE_SETTING(c.data.cache_budget_mb >= 0, "data.cache_budget_mb",
                  "the image cache's size must not be negative, got " << c.data.cache_budget_mb);
  REQUIRE_SETTING(c.data.max_train_images >= 0, "data.max_train_images",
                  "the training images' limit must not be negative (0 means all), got " << c.data.max_train_images);
  REQUIRE_SETTING(
      c.data.max_validation_images >= 0, "data.max_validation_images",
      "the validation images' limit must not be negative (0 means all), got " << c.data.max_validation_images);
  REQUIRE_SETTING(c.numerics_every >= 0, "numerics_every",
                  "the per-layer numerics' interval must not be negative (0: the last step of each epoch), got "
                      << c.numerics_every);
  REQUIRE_SETTING(c.max_steps_per_epoch >= 0, "max_steps_per_epoch",
                  "the steps per epoch must not be negative (0 means all), got " << c.max_steps_per_epoch);
  REQUIRE_SETTING(c.data.loader_threads >= 0 && c.data.loader_threads <= kMaxLoaderThreads, "data.loader_threads",
                  "the loader's thread count must be 0 (the training threads) to " << kMaxLoaderThreads << ", got "
                                                                                   << c.data.loader_threads);
}

void validate_for_data(const TrainConfig& c, int64_t classes, int64_t train_images) {
  REQUIRE_SETTING(c.topk <= classes, "topk",
                  "top-k " << c.topk << " is more than the dataset's " << classes
                           << " classes (its top-k accuracy would always be 100%)");
  REQUIRE_SETTING(c.batch_size <= train_images, "batch_size",
                  "the batch size " << c.batch_size << " is larger than the training split (" << train_images
                                    << " images): choose " << train_images << " or fewer");
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

TrainConfig effective_config(TrainConfig c) {
  if (c.precision.mode != PrecisionMode::AmpFp8) c.precision.fp8 = Fp8Config{};
  if (!c.precision.scales_loss()) c.precision.loss_scale = LossScaleConfig{LossScaleKind::Off};
  return c;
}

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
