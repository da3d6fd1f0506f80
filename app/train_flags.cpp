// Training flags bound to TrainConfig, with their help groups and checks.
#include "train_flags.h"

#include <charconv>
#include <cmath>
#include <filesystem>

#include "cli.h"
#include "core/error.h"
#include "facade/run_setup.h"
#include "setting_flags.h"

namespace ampwb::cli {
namespace {

// "static:S" -> S; anything else -> nullopt.
std::optional<double> static_scale(const std::string& text) {
  if (!text.starts_with("static:")) return std::nullopt;
  const std::string number = text.substr(7);
  char* stop = nullptr;
  const double scale = std::strtod(number.c_str(), &stop);
  if (number.empty() || stop != number.c_str() + number.size()) return std::nullopt;
  return scale;
}

// Adds `name`, a number of type T that sets `target` only when given (the preset's value stands otherwise).
template <class T>
CLI::Option* add_override(CLI::App* command, const std::string& name, std::optional<T>& target,
                          const std::string& help) {
  return command
      ->add_option_function<T>(
          name, [&target](const T& value) { target = value; }, help)
      ->transform(number_of<T>());
}

}  // namespace

const std::vector<std::string>& precision_modes() {
  static const std::vector<std::string> modes = [] {
    std::vector<std::string> names;
    for (const PrecisionModeInfo& mode : kPrecisionModes) names.push_back(mode.name);
    return names;
  }();
  return modes;
}

CLI::Option* add_precision_mode(CLI::App* command, std::string& mode) {
  return command
      ->add_option("--precision", mode,
                   "amp-*: autocast, FP32 master weights; fp16-o2: Apex O2; fp16-pure: an ablation; tf32: CUDA")
      ->type_name("MODE")
      ->check(CLI::IsMember(precision_modes()));
}

PrecisionConfig PrecisionFlags::resolve() const {
  PrecisionOverrides o{.scaler_preset = scaler_preset,
                       .init_scale = init_scale,
                       .growth_factor = growth_factor,
                       .backoff_factor = backoff_factor,
                       .min_scale = min_scale,
                       .max_scale = max_scale,
                       .growth_interval = growth_interval,
                       .hysteresis = hysteresis};
  if (loss_scale == "off" || loss_scale == "dynamic") {
    o.loss_scale_kind = *parse_choice<LossScaleKind>(loss_scale);
  } else if (const std::optional<double> scale = static_scale(loss_scale)) {
    o.loss_scale_kind = LossScaleKind::Static;
    if (!o.init_scale) o.init_scale = *scale;  // --init-scale, given as well, is the more specific
  } else if (!loss_scale.empty()) {  // the flag's check refuses it first; kept for callers that skip the parser
    throw Error("--loss-scale must be off, static:S or dynamic, got '" + loss_scale + "'");
  }
  if (!master_weights.empty()) o.master_weights = master_weights == "on";
  PrecisionConfig config = resolve_precision(parse_precision_mode(mode), o);
  config.fp8 = fp8;
  return config;
}

TrainConfig TrainFlags::resolve() const {
  TrainConfig c = config;
  c.stem = stem == "imagenet" ? Stem::ImageNet : stem == "small" ? Stem::Small : Stem::Auto;
  c.precision = precision.resolve();
  return c;
}

void add_train_flags(CLI::App* command, TrainFlags& flags) {
  TrainConfig& c = flags.config;
  // Each flag in its help group, and named as the flag of the setting it sets (setting_flags.h).
  const auto group = [](const char* name) {
    return [name](CLI::Option* option, const std::string& setting = "") {
      option->group(name);
      if (!setting.empty()) names_setting(option, setting);
    };
  };

  const auto data = group("Data");
  data(command->add_option("--data", c.data_dir, "the dataset folder (ampwb dataset inspect DIR shows what it holds)")
           ->type_name("DIR"),
       "data_dir");
  data(add_number(command, "--val-fraction,--validation-fraction", c.data.validation_fraction,
                  "the share of images held out for validation when the data has no split of its own"),
       "data.validation_fraction");
  data(add_number(command, "--max-train-images", c.data.max_train_images, "use at most N training images (0: all)"),
       "data.max_train_images");
  data(add_number(command, "--max-val-images", c.data.max_validation_images,
                  "validate on at most N images, the same ones each epoch, round-robin over the classes (0: all)"),
       "data.max_validation_images");
  data(command->add_flag("--augment", c.data.augment, "random crop and horizontal flip of training images"),
       "data.augment");
  data(add_choice(command, "--normalize", c.data.normalization, "per-channel statistics"), "data.normalization");
  data(command->add_flag("--drop-last", c.data.drop_last, "drop the last, smaller batch of an epoch"),
       "data.drop_last");
  data(add_number(command, "--cache-mb", c.data.cache_budget_mb, "memory for decoded images, in MiB"),
       "data.cache_budget_mb");

  const auto model = group("Model and optimisation");
  model(add_number(command, "--depth", c.depth, "ResNet depth: 18 34 50 101 152, or the CIFAR family 20 32 44 56 110"),
        "depth");
  model(add_number(command, "--image-size", c.image_size, "images resized to N px; auto: the data's own, at most 224")
            ->transform([](std::string text) {  // runs first: 0 is how a config says auto, never a size given
              int size = -1;
              const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), size);
              if (error == std::errc() && end == text.data() + text.size() && size == 0)
                throw CLI::ValidationError(
                    "0 is no image size: give 8 to 1024 px, or auto (the data's own, at most 224)");
              return text == "auto" ? std::string("0") : text;
            })
            ->type_name("N|auto")
            ->default_str("auto"),
        "image_size");
  model(command->add_option("--stem", flags.stem, "auto: 3x3 stride 1 without max pool under 64 px, else ImageNet's")
            ->type_name("STEM")
            ->check(CLI::IsMember({"auto", "imagenet", "small"})),
        "stem");
  model(add_number(command, "--epochs", c.epochs, "training epochs"), "epochs");
  model(add_number(command, "--batch-size", c.batch_size, "images per step"), "batch_size");
  model(add_number(command, "--lr", c.lr, "peak learning rate"), "lr");
  model(add_choice(command, "--schedule", c.schedule, "learning rate schedule"), "schedule");
  model(add_number(command, "--warmup-epochs", c.warmup_epochs, "linear warm-up epochs"), "warmup_epochs");
  model(add_choice(command, "--optimizer", c.optimizer.kind, "the optimizer"), "optimizer.kind");
  model(add_number(command, "--momentum", c.optimizer.momentum, "SGD momentum"), "optimizer.momentum");
  model(command->add_flag("--nesterov", c.optimizer.nesterov, "Nesterov momentum (SGD)"), "optimizer.nesterov");
  model(add_number(command, "--weight-decay", c.optimizer.weight_decay, "L2 penalty (decoupled for AdamW)"),
        "optimizer.weight_decay");
  model(add_number(command, "--label-smoothing", c.label_smoothing, "in [0, 1)"), "label_smoothing");
  model(
      add_number(command, "--grad-clip", c.grad_clip_norm, "clip the gradients' global norm to this (0: no clipping)"),
      "grad_clip_norm");
  model(add_number(command, "--topk", c.topk, "also report top-k validation accuracy"), "topk");
  model(add_number(command, "--seed", c.seed, "seeds the weights, the split, the order and augmentation"), "seed");

  const auto precision = group("Precision");
  PrecisionFlags& p = flags.precision;
  precision(add_precision_mode(command, p.mode), "precision.mode");
  precision(command
                ->add_option("--loss-scale", p.loss_scale,
                             "loss scaling: off, static:S (a fixed scale S) or dynamic (default: the mode's)")
                ->type_name("KIND")
                ->check(CLI::Validator(
                    [](std::string& text) -> std::string {
                      if (const std::optional<double> scale = static_scale(text))
                        return std::isfinite(*scale) && *scale > 0
                                   ? ""
                                   : "static:S takes a positive, finite scale, got '" + text + "'";
                      if (text == "off" || text == "dynamic") return "";
                      return "must be off, static:S (S a number) or dynamic, got '" + text + "'";
                    },
                    "")),
            "precision.loss_scale.kind");
  precision(command->add_option("--master-weights", p.master_weights, "FP32 master weights (default: the mode's)")
                ->type_name("on|off")
                ->check(CLI::IsMember({"on", "off"})),
            "precision.master_weights");
  precision(
      command->add_option("--scaler-preset", p.scaler_preset, "another framework's loss-scaler defaults")
          ->type_name("NAME")
          ->check(CLI::IsMember({"pytorch", "apex", "paddle", "paddle-2.2", "deepspeed", "megatron", "tensorflow"})));
  precision(add_override(command, "--init-scale", p.init_scale, "the first loss scale (PyTorch: 65536)"),
            "precision.loss_scale.init_scale");
  precision(add_override(command, "--growth-factor", p.growth_factor, "the scale's growth (PyTorch: 2)"),
            "precision.loss_scale.growth_factor");
  precision(add_override(command, "--backoff-factor", p.backoff_factor, "the scale's back-off (PyTorch: 0.5)"),
            "precision.loss_scale.backoff_factor");
  precision(add_override(command, "--growth-interval", p.growth_interval,
                         "finite steps before the scale grows (PyTorch: 2000)"),
            "precision.loss_scale.growth_interval");
  precision(add_override(command, "--hysteresis", p.hysteresis,
                         "overflowing steps tolerated before backing off (PyTorch: 1)"),
            "precision.loss_scale.hysteresis");
  precision(add_override(command, "--min-scale", p.min_scale, "the smallest loss scale (PyTorch: 0, none)"),
            "precision.loss_scale.min_scale");
  precision(add_override(command, "--max-scale", p.max_scale, "the largest loss scale (PyTorch: 0, none)"),
            "precision.loss_scale.max_scale");
  precision(add_number(command, "--fp8-amax-history", p.fp8.scaling.history_length,
                       "amp-fp8: the steps of amax history a tensor's scale comes from (Transformer Engine: 1024)"),
            "precision.fp8.amax_history_length");
  precision(
      add_number(command, "--fp8-margin", p.fp8.scaling.margin,
                 "amp-fp8: powers of two kept between a scaled amax and the format's max (Transformer Engine: 0)"),
      "precision.fp8.margin");
  precision(add_choice(command, "--fp8-amax-rule", p.fp8.scaling.rule, "amp-fp8: the amax a scale comes from"),
            "precision.fp8.amax_rule");
  precision(add_choice(command, "--fp8-formats", p.fp8.formats, "amp-fp8: the tensors' formats"),
            "precision.fp8.formats");
  precision(command->add_flag("--fp8-first-last", p.fp8.first_and_last,
                              "amp-fp8: the first convolution and the last linear layer in FP8 too (else BF16)"),
            "precision.fp8.first_and_last");

  const auto run = group("Run");
  run(command->add_option("--name", c.name, "the run's name in the run store")->type_name("NAME"), "name");
  run(add_named_value(command, "--device", c.device, "cpu, cuda, cuda:N or auto (a GPU when one is usable)"));
  run(add_number(command, "--threads", c.threads, "CPU threads (0: every core)"), "threads");
  run(add_choice(command, "--host-sync", c.host_sync, "when a step waits for its device"), "host_sync");
  run(add_choice(command, "--cuda-graphs", c.cuda_graphs, "deferred steps as CUDA graphs"), "cuda_graphs");
  run(add_choice(command, "--conv-algorithm", c.conv_algorithm, "CPU convolutions"), "conv_algorithm");
  run(command->add_flag(
          "--deterministic", c.deterministic,
          "GPU: deterministic convolutions chosen without timing, so that a run repeats bit for bit (slower)"),
      "deterministic");
  run(command->add_flag("--sync-batchnorm", c.data_parallel.sync_batchnorm,
                        "on many processes: batch norm's statistics over every process's batch"),
      "data_parallel.sync_batchnorm");
  run(add_choice(command, "--gradient-allreduce", c.data_parallel.gradient_allreduce,
                 "on many processes: the precision the gradients travel in"),
      "data_parallel.gradient_allreduce");
  run(add_number(command, "--max-skipped", c.max_consecutive_skipped,
                 "stop the run after this many skipped steps in a row"),
      "max_consecutive_skipped");
  run(add_number(command, "--max-steps-per-epoch", c.max_steps_per_epoch, "cut epochs short (0: whole epochs)"),
      "max_steps_per_epoch");
  run(add_number(command, "--numerics-every", c.numerics_every,
                 "per-layer numerics every N steps too (0: the last step of each epoch only)"),
      "numerics_every");
  run(command
          ->add_option("--checkpoint-dir", c.checkpoint_dir,
                       "where checkpoints go, a folder for this run alone (default: one beside the run store)")
          ->type_name("DIR"),
      "checkpoint_dir");
}

std::string absolute_folder(const std::string& folder) {
  if (folder.empty()) return folder;
  std::error_code ec;
  // A path quoted twice over ("'/data/cats'" on a command line, whose shell keeps the inner quotes, or in a file).
  if (const char q = folder.front();
      folder.size() > 2 && (q == '\'' || q == '"') && folder.back() == q && !std::filesystem::exists(folder, ec)) {
    const std::string unquoted = folder.substr(1, folder.size() - 2);
    if (std::filesystem::is_directory(unquoted, ec))
      throw Error("the folder " + folder + " does not exist: its quotes are part of the name given; without them, " +
                  unquoted + " is a folder");
  }
  std::string path = std::filesystem::absolute(folder, ec).lexically_normal().string();
  if (ec) return folder;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

}  // namespace ampwb::cli
