// Everything that defines a training run, as one value type with its field list (the run store keeps it, the CLI
// and the UI fill it, comparisons and resume checks walk it). Defaults are the engine-foundation recipe; validate()
// refuses bad settings by name.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "amp/precision.h"
#include "backend/make_backend.h"
#include "data/normalization.h"
#include "models/resnet.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "train/data_parallel_settings.h"
#include "train/record_fields.h"
#include "train/step_settings.h"

namespace ampwb {

constexpr int kMaxThreads = 1024;  // training threads (--threads)
// Validation images per epoch when the settings name none: a larger validation split (Fashion-MNIST's 10,000) would
// take longer than the epoch's training; 2,000 images measure an accuracy to about a percentage point.
constexpr int64_t kDefaultMaxValidationImages = 2000;

struct DataConfig {
  double validation_fraction = 0.2;
  int64_t max_train_images = 0;                                    // 0 = all
  bool augment = false;                                            // random crop and horizontal flip for training
  NormalizationStats normalization = NormalizationStats::Dataset;  // data/normalization.h
  bool drop_last = false;
  int64_t cache_budget_mb = 2048;
  int loader_threads = 0;  // 0 = the training threads
  // 0 = all; else the first N of the validation split, round-robin over the classes: the same images every epoch.
  // Configurations stored before this setting read as 0: they validated on every image.
  int64_t max_validation_images = kDefaultMaxValidationImages;
};

struct TrainConfig {
  std::string name;
  std::string data_dir;
  int depth = 18;
  int epochs = 3;
  int batch_size = 64;
  int image_size = 0;  // 0 = the shorter side of the data's first image, at most 224
  Stem stem = Stem::Auto;
  float lr = 0.05f;
  Schedule schedule = Schedule::Cosine;  // optim/lr_schedule.h
  int warmup_epochs = 0;
  OptimizerConfig optimizer;
  float label_smoothing = 0.0f;
  float grad_clip_norm = 0.0f;  // 0 = no clipping; applied to unscaled gradients
  int topk = 2;                 // the seed articles report top-2; not reported where k covers every class
  uint64_t seed = 0;
  DeviceChoice device;                        // the CPU unless asked
  HostSync host_sync = HostSync::Auto;        // when a step waits for its device (train/step_settings.h)
  CudaGraphs cuda_graphs = CudaGraphs::Auto;  // deferred steps captured and replayed as CUDA graphs
  // CPU convolutions (FP32 and emulated 16-bit 3x3 ones; with AVX-512, those of small images, native BF16 ones only
  // on AMX; backend/make_backend.h). The run's backend description records what ran.
  ConvAlgorithm conv_algorithm = ConvAlgorithm::Auto;
  bool deterministic = false;  // CUDA: deterministic convolutions only (backend/make_backend.h)
  int threads = 0;  // 0 = every core; at most kMaxThreads
  PrecisionConfig precision;
  DataConfig data;
  DataParallelConfig data_parallel;       // runs on many processes (train/data_parallel_settings.h)
  int64_t max_steps_per_epoch = 0;        // 0 = the whole epoch (tests use small numbers)
  int64_t max_consecutive_skipped = 100;  // a run that skips this many steps in a row is stopped
  int numerics_every = 0;         // per-layer numerics: the last step of each epoch, and with N > 0 every N-th step too
  std::string checkpoint_dir;     // empty = no checkpoints
  bool keep_checkpoints = false;  // a finished run keeps them (else a folder made for it beside the store goes)
  std::string resume_from;        // a checkpoint file to continue from (not part of the run's identity)
};

// --- the field lists (train/record_fields.h): JSON keys as the run store has always kept them ---

template <class R, class V>
requires same_record<R, OptimizerConfig>
void fields(R& o, V&& v) {
  v("kind", o.kind);
  v("momentum", o.momentum);
  v("nesterov", o.nesterov);
  v("weight_decay", o.weight_decay);
  v("beta1", o.beta1);
  v("beta2", o.beta2);
  v("eps", o.eps);
}

template <class R, class V>
requires same_record<R, LossScaleConfig>
void fields(R& s, V&& v) {
  v("kind", s.kind);
  v("init_scale", s.init_scale);
  v("growth_factor", s.growth_factor);
  v("backoff_factor", s.backoff_factor);
  v("growth_interval", s.growth_interval);
  v("hysteresis", s.hysteresis);
  v("min_scale", s.min_scale);
  v("max_scale", s.max_scale);
}

// Configurations stored before amp-fp8 hold none of these: they read as the defaults (Transformer Engine's).
template <class R, class V>
requires same_record<R, Fp8Config>
void fields(R& f, V&& v) {
  v("amax_history_length", f.scaling.history_length);
  v("margin", f.scaling.margin);
  v("amax_rule", f.scaling.rule);
  v("formats", f.formats);
  v("first_and_last", f.first_and_last);
}

template <class R, class V>
requires same_record<R, PrecisionConfig>
void fields(R& p, V&& v) {
  v("mode", p.mode);
  v("master_weights", p.master_weights);
  v("loss_scale", p.loss_scale);
  v("fp8", p.fp8);
}

template <class R, class V>
requires same_record<R, DataParallelConfig>
void fields(R& d, V&& v) {
  v("sync_batchnorm", d.sync_batchnorm);
  v("gradient_allreduce", d.gradient_allreduce);
}

template <class R, class V>
requires same_record<R, DataConfig>
void fields(R& d, V&& v) {
  v("validation_fraction", d.validation_fraction);
  v("max_train_images", d.max_train_images);
  v("augment", d.augment);
  v("normalization", d.normalization);
  v("drop_last", d.drop_last);
  v("cache_budget_mb", d.cache_budget_mb);
  v("loader_threads", d.loader_threads);
  v("max_validation_images", d.max_validation_images);
}

// resume_from is not listed: it says where this process continues from, not what the run is.
template <class R, class V>
requires same_record<R, TrainConfig>
void fields(R& c, V&& v) {
  v("name", c.name);
  v("data_dir", c.data_dir);
  v("depth", c.depth);
  v("epochs", c.epochs);
  v("batch_size", c.batch_size);
  v("image_size", c.image_size);
  v("stem", c.stem);
  v("lr", c.lr);
  v("schedule", c.schedule);
  v("warmup_epochs", c.warmup_epochs);
  v("optimizer", c.optimizer);
  v("label_smoothing", c.label_smoothing);
  v("grad_clip_norm", c.grad_clip_norm);
  v("topk", c.topk);
  v("seed", c.seed);
  v("device", c.device);
  v("host_sync", c.host_sync);
  v("cuda_graphs", c.cuda_graphs);
  v("conv_algorithm", c.conv_algorithm);
  v("deterministic", c.deterministic);
  v("threads", c.threads);
  v("precision", c.precision);
  v("data", c.data);
  v("data_parallel", c.data_parallel);
  v("max_steps_per_epoch", c.max_steps_per_epoch);
  v("max_consecutive_skipped", c.max_consecutive_skipped);
  v("numerics_every", c.numerics_every);
  v("checkpoint_dir", c.checkpoint_dir);
  v("keep_checkpoints", c.keep_checkpoints);
}

// Refuses invalid settings before any work starts, naming the setting.
void validate(const TrainConfig& config);
// The settings that depend on the data (top-k within the class count, a batch no larger than the training split);
// throws ampwb::Error with a message for the user.
void validate_for_data(const TrainConfig& c, int64_t classes, int64_t train_images);

// JSON from the field list. Reading keeps the defaults of missing keys (configurations stored by older versions
// still load) and refuses a value that does not fit its field by name ("the stored configuration's depth ...").
void to_json(nlohmann::json& j, const TrainConfig& c);
void from_json(const nlohmann::json& j, TrainConfig& c);
// The enums by name: "auto", "imagenet", "small"; the precision modes' names ("amp-fp16"), an unknown one refused.
void to_json(nlohmann::json& j, const Stem& stem);
void from_json(const nlohmann::json& j, Stem& stem);
void to_json(nlohmann::json& j, const PrecisionMode& mode);
void from_json(const nlohmann::json& j, PrecisionMode& mode);

// The configuration as it takes effect: FP8's settings outside amp-fp8, and the loss scaler's where nothing scales
// the loss, are their defaults whatever was given, so that runs differ in their records only where they trained
// differently.
TrainConfig effective_config(TrainConfig c);

// Every setting as (dotted key, value as people read it), in field-list order: ("precision.loss_scale.kind",
// "dynamic"), ("lr", "0.05"). What `ampwb show` lists and comparisons and resume checks compare.
std::vector<std::pair<std::string, std::string>> config_settings(const TrainConfig& c);

// The configuration as JSON text and back (for settings files: the GUI keeps its last configuration so); reading
// throws ampwb::Error when the text is not JSON or a value does not fit.
std::string config_to_json_text(const TrainConfig& c);
TrainConfig config_from_json_text(const std::string& text, TrainConfig base = {});

}  // namespace ampwb
