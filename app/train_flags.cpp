// Training flags -> TrainConfig.
#include "train_flags.h"

#include "amp/loss_scaler.h"
#include "core/error.h"

namespace ampwb::cli {
namespace {
Stem parse_stem(const std::string& s) {
  if (s == "auto") return Stem::Auto;
  if (s == "imagenet") return Stem::ImageNet;
  if (s == "small") return Stem::Small;
  throw Error("--stem must be auto, imagenet or small, got '" + s + "'");
}
}  // namespace

TrainConfig parse_train_flags(Args& args) {
  TrainConfig c;
  c.name = args.text("name", "");
  c.data_dir = args.text("data", "");
  c.depth = args.integer("depth", c.depth);
  c.epochs = args.integer("epochs", c.epochs);
  c.batch_size = args.integer("batch-size", c.batch_size);
  // "auto" (the documented default): the data's own size, at most 224.
  c.image_size = args.text("image-size", "") == "auto" ? 0 : args.integer("image-size", c.image_size);
  c.stem = parse_stem(args.text("stem", "auto"));
  c.lr = static_cast<float>(args.number("lr", c.lr));
  c.schedule = args.text("schedule", c.schedule);
  c.warmup_epochs = args.integer("warmup-epochs", c.warmup_epochs);
  c.optimizer.kind = args.text("optimizer", c.optimizer.kind);
  c.optimizer.momentum = static_cast<float>(args.number("momentum", c.optimizer.momentum));
  c.optimizer.nesterov = args.flag("nesterov");
  c.optimizer.weight_decay = static_cast<float>(args.number("weight-decay", c.optimizer.weight_decay));
  c.label_smoothing = static_cast<float>(args.number("label-smoothing", c.label_smoothing));
  c.grad_clip_norm = static_cast<float>(args.number("grad-clip", c.grad_clip_norm));
  c.topk = args.integer("topk", c.topk);
  c.seed = static_cast<uint64_t>(args.integer64("seed", 0));
  c.device = args.text("device", c.device);
  c.threads = args.integer("threads", c.threads);
  c.data.validation_fraction = args.number("val-fraction", c.data.validation_fraction);
  c.data.max_train_images = args.integer64("max-train-images", 0);
  c.data.augment = args.flag("augment");
  c.data.normalization = args.text("normalize", c.data.normalization);
  c.data.drop_last = args.flag("drop-last");
  c.data.cache_budget_mb = args.integer64("cache-mb", c.data.cache_budget_mb);
  c.max_steps_per_epoch = args.integer64("max-steps-per-epoch", 0);
  c.max_consecutive_skipped = args.integer64("max-skipped", c.max_consecutive_skipped);
  c.checkpoint_dir = args.text("checkpoint-dir", "");
  c.precision = parse_precision_flags(args);
  return c;
}

PrecisionConfig parse_precision_flags(Args& args) {
  // The mode's preset, then a framework's scaler defaults, then single overrides (for ablations).
  PrecisionConfig p = precision_preset(args.text("precision", "fp32"));
  const std::string framework = args.text("scaler-preset", "");
  if (!framework.empty()) {
    const std::string kind = p.loss_scale.kind;
    p.loss_scale = loss_scale_preset(framework);
    p.loss_scale.kind = kind;
  }
  const std::string scaling = args.text("loss-scale", "");
  if (scaling == "off" || scaling == "dynamic") {
    p.loss_scale.kind = scaling;
  } else if (scaling.starts_with("static:")) {
    p.loss_scale.kind = "static";
    try {
      p.loss_scale.init_scale = std::stod(scaling.substr(7));
    } catch (const std::exception&) {
      throw Error("--loss-scale static:S needs a number S, got '" + scaling + "'");
    }
  } else if (!scaling.empty()) {
    throw Error("--loss-scale must be off, static:S or dynamic, got '" + scaling + "'");
  }
  const std::string master = args.text("master-weights", "");
  if (master == "on" || master == "off")
    p.master_weights = master == "on";
  else if (!master.empty())
    throw Error("--master-weights must be on or off, got '" + master + "'");
  LossScaleConfig& s = p.loss_scale;
  s.init_scale = args.number("init-scale", s.init_scale);
  s.growth_factor = args.number("growth-factor", s.growth_factor);
  s.backoff_factor = args.number("backoff-factor", s.backoff_factor);
  s.growth_interval = args.integer64("growth-interval", s.growth_interval);
  s.hysteresis = args.integer("hysteresis", s.hysteresis);
  s.min_scale = args.number("min-scale", s.min_scale);
  s.max_scale = args.number("max-scale", s.max_scale);
  return p;
}

const char* train_flags_help() {
  return "          --data DIR [--name NAME] [--depth 18] [--epochs 3] [--batch-size 64] [--image-size auto]\n"
         "          [--lr 0.05] [--optimizer sgd|adam|adamw] [--momentum 0.9] [--nesterov] [--weight-decay 0]\n"
         "          [--schedule cosine|step|constant] [--warmup-epochs 0] [--label-smoothing 0] [--grad-clip 0]\n"
         "          [--topk 2] [--seed 0] [--device cpu|cuda|auto] [--threads N] [--val-fraction 0.2]\n"
         "          [--max-train-images N] [--augment] [--normalize dataset|imagenet] [--drop-last]\n"
         "          [--cache-mb 2048] [--stem auto|imagenet|small] [--max-skipped 100]\n"
         "          [--checkpoint-dir DIR (default: a folder beside the run store) | --no-checkpoint]\n"
         "          [--keep-checkpoint (else a finished run's checkpoints are removed)]\n"
         "          [--precision fp32|tf32|amp-fp16|amp-bf16|fp16-o2|fp16-pure] [--loss-scale off|static:S|dynamic]\n"
         "          [--master-weights on|off] [--scaler-preset pytorch|apex|paddle|paddle-2.2|deepspeed|megatron|\n"
         "          tensorflow] [--init-scale 65536] [--growth-factor 2] [--backoff-factor 0.5]\n"
         "          [--growth-interval 2000] [--hysteresis 1] [--min-scale 0] [--max-scale 0]\n";
}

}  // namespace ampwb::cli
