// ampwb train: trains a ResNet on an image folder and prints one line per epoch.
#include <cstdio>

#include "commands.h"
#include "core/error.h"
#include "train/trainer.h"
#include "train_flags.h"

namespace ampwb::cli {
namespace {

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
  TrainConfig c = parse_train_flags(args);
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
