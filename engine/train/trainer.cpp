// The training loop.
#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include "core/error.h"

namespace ampwb {
namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
}  // namespace

void validate(const TrainConfig& c) {
  AMPWB_CHECK(!c.data_dir.empty(), "no dataset folder given (--data DIR)");
  const std::vector<int> depths = supported_depths();
  AMPWB_CHECK(std::find(depths.begin(), depths.end(), c.depth) != depths.end(),
              "unsupported depth " << c.depth << " (expected 18, 34, 50, 101, 152, 20, 32, 44, 56 or 110)");
  AMPWB_CHECK(c.epochs >= 1, "--epochs must be at least 1, got " << c.epochs);
  AMPWB_CHECK(c.batch_size >= 2, "--batch-size must be at least 2 (batch norm needs two samples), got "
                                     << c.batch_size);
  AMPWB_CHECK(c.image_size == 0 || (c.image_size >= 8 && c.image_size <= 1024),
              "--image-size must be between 8 and 1024, got " << c.image_size);
  AMPWB_CHECK(c.lr > 0 && std::isfinite(c.lr), "--lr must be positive, got " << c.lr);
  AMPWB_CHECK(c.warmup_epochs >= 0 && c.warmup_epochs < c.epochs + 1, "--warmup-epochs out of range");
  AMPWB_CHECK(c.label_smoothing >= 0 && c.label_smoothing < 1, "--label-smoothing must be in [0, 1)");
  AMPWB_CHECK(c.validation_fraction >= 0 && c.validation_fraction < 1, "--val-fraction must be in [0, 1)");
  AMPWB_CHECK(c.topk >= 1, "--topk must be at least 1");
  AMPWB_CHECK(c.optimizer.kind == "sgd" || c.optimizer.kind == "adam" || c.optimizer.kind == "adamw",
              "unknown optimizer '" << c.optimizer.kind << "' (expected sgd, adam or adamw)");
  AMPWB_CHECK(c.schedule == "constant" || c.schedule == "step" || c.schedule == "cosine",
              "unknown schedule '" << c.schedule << "' (expected constant, step or cosine)");
  AMPWB_CHECK(c.threads >= 0, "--threads must not be negative");
}

StepResult train_step(ResNet& model, SoftmaxCrossEntropy& loss, Optimizer& optimizer, const Tensor& images,
                      const Tensor& labels, float lr) {
  Tensor logits = model.forward(images, Mode::Train);
  StepResult r;
  r.loss = loss.forward(logits, labels);
  r.correct = count_topk_correct(logits, labels, 1);
  model.backward(loss.backward());
  optimizer.step(model.parameters(), lr);
  return r;
}

Evaluation evaluate(ResNet& model, Backend& backend, ImageBatcher& data, int batch_size, int topk) {
  Evaluation e;
  if (data.size() == 0) return e;
  SoftmaxCrossEntropy loss(backend);
  data.unshuffle();
  int64_t correct = 0, correct_k = 0;
  double total_loss = 0;
  for (int64_t b = 0; b < data.batches(batch_size); ++b) {
    Tensor images, labels;
    data.batch(b, batch_size, images, labels);
    Tensor logits = model.forward(images, Mode::Eval);
    total_loss += static_cast<double>(loss.forward(logits, labels)) * labels.numel();
    correct += count_topk_correct(logits, labels, 1);
    correct_k += count_topk_correct(logits, labels, topk);
  }
  e.loss = total_loss / data.size();
  e.accuracy = static_cast<double>(correct) / data.size();
  e.topk_accuracy = static_cast<double>(correct_k) / data.size();
  return e;
}

EpochReport train(const TrainConfig& config, TrainObserver* observer) {
  validate(config);
  auto backend = make_backend(config.device, {config.threads});
  const ImageDataset dataset =
      scan_image_folder(config.data_dir, {config.validation_fraction, config.seed, config.max_train_images});
  const int image_size = config.image_size > 0 ? config.image_size : std::min(224, probe_image_size(dataset));
  const int threads = config.threads > 0 ? config.threads : static_cast<int>(std::thread::hardware_concurrency());

  ImageBatcher train_data(dataset.train, image_size, {}, threads);
  const Normalization norm = train_data.compute_statistics(2000);
  train_data = ImageBatcher(dataset.train, image_size, norm, threads);
  ImageBatcher validation_data(dataset.validation, image_size, norm, threads);

  Rng rng(config.seed);
  ResNetConfig model_config{config.depth, static_cast<int>(dataset.class_names.size()), 3, image_size, config.stem};
  ResNet model(*backend, model_config, rng);
  auto optimizer = make_optimizer(*backend, config.optimizer);
  SoftmaxCrossEntropy loss(*backend, config.label_smoothing);

  int64_t steps_per_epoch = train_data.batches(config.batch_size);
  if (config.max_steps_per_epoch > 0) steps_per_epoch = std::min(steps_per_epoch, config.max_steps_per_epoch);
  LrScheduleConfig schedule{config.schedule, config.lr, steps_per_epoch * config.epochs,
                            steps_per_epoch * config.warmup_epochs, std::max<int64_t>(1, steps_per_epoch * 30)};
  const LrSchedule lr_schedule(schedule);
  const int topk = std::min<int>(config.topk, static_cast<int>(dataset.class_names.size()));

  if (observer)
    observer->on_start({model.summary(), backend->description(), image_size, train_data.size(),
                        validation_data.size(), dataset.class_names, dataset.layout});

  EpochReport report;
  Rng shuffle_rng(config.seed ^ 0x5eedULL);
  int64_t global_step = 0;
  for (int epoch = 1; epoch <= config.epochs; ++epoch) {
    allocator_for(Device::cpu()).reset_peak();
    const auto epoch_start = Clock::now();
    train_data.shuffle(shuffle_rng);
    double data_wait = 0, loss_sum = 0;
    int64_t seen = 0, correct = 0;
    for (int64_t b = 0; b < steps_per_epoch; ++b, ++global_step) {
      const auto wait_start = Clock::now();
      Tensor images, labels;
      train_data.batch(b, config.batch_size, images, labels);
      data_wait += seconds_since(wait_start);
      if (images.n() < 2) continue;  // batch norm cannot train on a single sample
      const float lr = lr_schedule.at(global_step);
      const StepResult r = train_step(model, loss, *optimizer, images, labels, lr);
      AMPWB_CHECK(std::isfinite(r.loss), "the loss became " << r.loss << " at epoch " << epoch << " step " << b
                                                            << " in FP32: lower the learning rate");
      loss_sum += static_cast<double>(r.loss) * images.n();
      correct += r.correct;
      seen += images.n();
      if (observer)
        observer->on_step({epoch, global_step, r.loss, static_cast<float>(r.correct) / images.n(), lr});
    }
    const double train_seconds = seconds_since(epoch_start);
    const Evaluation val = evaluate(model, *backend, validation_data, config.batch_size, topk);
    report.epoch = epoch;
    report.train_loss = seen ? loss_sum / seen : 0;
    report.train_accuracy = seen ? static_cast<double>(correct) / seen : 0;
    report.validation_loss = val.loss;
    report.validation_accuracy = val.accuracy;
    report.validation_topk = val.topk_accuracy;
    report.seconds = seconds_since(epoch_start);
    report.images_per_second = train_seconds > 0 ? seen / train_seconds : 0;
    report.data_wait_seconds = data_wait;
    report.peak_bytes = allocator_for(Device::cpu()).stats().peak_live_bytes;
    if (observer) observer->on_epoch(report);
  }
  return report;
}

}  // namespace ampwb
