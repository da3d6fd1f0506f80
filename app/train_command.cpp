// ampwb train: trains a ResNet on an image folder and prints one line per epoch.
#include <cstdio>

#include "commands.h"
#include "core/error.h"
#include "train/trainer.h"

namespace ampwb::cli {
namespace {

Stem parse_stem(const std::string& s) {
  if (s == "auto") return Stem::Auto;
  if (s == "imagenet") return Stem::ImageNet;
  if (s == "small") return Stem::Small;
  throw Error("--stem must be auto, imagenet or small, got '" + s + "'");
}

class PrintingObserver : public TrainObserver {
 public:
  PrintingObserver(int epochs, bool quiet) : epochs_(epochs), quiet_(quiet) {}
  void on_start(const RunInfo& info) override {
    if (quiet_) return;
    std::printf("dataset: %lld training and %lld validation images, %zu classes (%s), %d px\n",
                static_cast<long long>(info.train_images), static_cast<long long>(info.validation_images),
                info.class_names.size(), info.dataset_layout.c_str(), info.image_size);
    std::printf("model:   %s\ndevice:  %s\n", info.model_summary.c_str(), info.backend_description.c_str());
    std::fflush(stdout);
  }
  void on_epoch(const EpochReport& r) override {
    reports.push_back(r);
    if (quiet_) return;
    std::printf(
        "epoch %d/%d  train loss %.4f acc %.2f%%  val loss %.4f acc %.2f%% top-k %.2f%%  %.1f s  %.1f img/s  "
        "data wait %.2f s  peak %.1f MiB\n",
        r.epoch, epochs_, r.train_loss, 100 * r.train_accuracy, r.validation_loss, 100 * r.validation_accuracy,
        100 * r.validation_topk, r.seconds, r.images_per_second, r.data_wait_seconds, r.peak_bytes / 1048576.0);
    std::fflush(stdout);
  }
  std::vector<EpochReport> reports;

 private:
  int epochs_;
  bool quiet_;
};

}  // namespace

int train_command(Args& args) {
  TrainConfig c;
  c.data_dir = args.text("data", "");
  c.depth = args.integer("depth", c.depth);
  c.epochs = args.integer("epochs", c.epochs);
  c.batch_size = args.integer("batch-size", c.batch_size);
  c.image_size = args.integer("image-size", c.image_size);
  c.stem = parse_stem(args.text("stem", "auto"));
  c.lr = static_cast<float>(args.number("lr", c.lr));
  c.schedule = args.text("schedule", c.schedule);
  c.warmup_epochs = args.integer("warmup-epochs", c.warmup_epochs);
  c.optimizer.kind = args.text("optimizer", c.optimizer.kind);
  c.optimizer.momentum = static_cast<float>(args.number("momentum", c.optimizer.momentum));
  c.optimizer.nesterov = args.flag("nesterov");
  c.optimizer.weight_decay = static_cast<float>(args.number("weight-decay", c.optimizer.weight_decay));
  c.label_smoothing = static_cast<float>(args.number("label-smoothing", c.label_smoothing));
  c.topk = args.integer("topk", c.topk);
  c.seed = static_cast<uint64_t>(args.integer64("seed", 0));
  c.device = args.text("device", c.device);
  c.threads = args.integer("threads", c.threads);
  c.validation_fraction = args.number("val-fraction", c.validation_fraction);
  c.max_train_images = args.integer64("max-train-images", 0);
  c.max_steps_per_epoch = args.integer64("max-steps-per-epoch", 0);
  const bool json = args.flag("json");
  args.reject_unknown();

  PrintingObserver observer(c.epochs, json);
  const EpochReport last = train(c, &observer);
  if (json) {
    std::printf("{\"epochs\": [");
    for (size_t i = 0; i < observer.reports.size(); ++i) {
      const EpochReport& r = observer.reports[i];
      std::printf(
          "%s{\"epoch\": %d, \"train_loss\": %.6g, \"train_accuracy\": %.6g, \"validation_loss\": %.6g, "
          "\"validation_accuracy\": %.6g, \"validation_topk\": %.6g, \"seconds\": %.6g, \"images_per_second\": "
          "%.6g, \"data_wait_seconds\": %.6g, \"peak_bytes\": %zu}",
          i ? ", " : "", r.epoch, r.train_loss, r.train_accuracy, r.validation_loss, r.validation_accuracy,
          r.validation_topk, r.seconds, r.images_per_second, r.data_wait_seconds, r.peak_bytes);
    }
    std::printf("], \"final_validation_accuracy\": %.6g}\n", last.validation_accuracy);
  }
  return 0;
}

}  // namespace ampwb::cli
