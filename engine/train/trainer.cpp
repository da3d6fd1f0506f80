// The training loop and its controls.
#include "train/trainer.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>

#include "core/error.h"
#include "optim/lr_schedule.h"
#include "train/benchmark.h"
#include "train/checkpoint.h"
#include "train/divergence_step.h"
#include "train/lost_images.h"
#include "train/memory_estimate.h"
#include "train/step_timer.h"

namespace ampwb {
namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// "10,000": counts of images in notes, as people read them.
std::string counted(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0 && digits[i - 1] != '-') out += ',';
    out += digits[i];
  }
  return out;
}

// Forwards every event to an optional observer.
struct Report {
  TrainObserver* observer;
  template <class Event>
  void operator()(void (TrainObserver::*handler)(const Event&), const Event& e) const {
    if (observer) (observer->*handler)(e);
  }
};

// A checkpoint folder that cannot be written would fail the run at the end of its first epoch: made, and a file
// written in it, before the run starts (and is stored).
void require_writable_folder(const std::string& folder) {
  std::error_code error;
  std::filesystem::create_directories(folder, error);
  const std::filesystem::path probe = std::filesystem::path(folder) / ".ampwb-write-check";
  if (!error) {
    if (std::FILE* file = std::fopen(probe.c_str(), "wb")) {
      std::fclose(file);
      std::filesystem::remove(probe, error);
    } else {
      error = std::error_code(errno, std::generic_category());
    }
  }
  if (error)
    throw Error("cannot write checkpoints to " + folder + ": " + error.message() +
                " (choose another --checkpoint-dir, or --no-checkpoint)");
}
}  // namespace

const char* run_status_name(RunStatus s) {
  switch (s) {
    case RunStatus::Running:
      return "running";
    case RunStatus::Finished:
      return "finished";
    case RunStatus::Failed:
      return "failed";
    case RunStatus::Cancelled:
      return "cancelled";
    case RunStatus::Interrupted:
      return "interrupted";
  }
  return "?";
}

Evaluation evaluate(ResNet& model, Backend& backend, DataLoader& data, int topk,
                    const std::function<void(int64_t images_done)>& progress) {
  Evaluation e;
  if (data.size() == 0) {
    e.loss = e.accuracy = e.topk_accuracy = std::numeric_limits<double>::quiet_NaN();
    return e;
  }
  SoftmaxCrossEntropy loss(backend);
  data.start_epoch(0);
  int64_t correct = 0, correct_k = 0, seen = 0;
  double total_loss = 0;
  Batch batch;
  if (progress) progress(0);
  while (data.next(batch)) {
    const Tensor logits = cast(backend, model.forward(backend.upload(batch.images), Mode::Eval), DType::F32);
    loss.forward(logits, backend.upload(batch.labels));
    const StepScalars read = backend.read_scalars();  // the loss and the top-1 count in one copy
    total_loss += read.loss * static_cast<double>(batch.labels.numel());
    correct += read.correct;
    const Tensor host_logits = on_host(backend, logits);  // (N, classes): small
    correct_k += topk == 1 ? read.correct : count_topk_correct(host_logits, batch.labels, topk);
    add_to_confusion(host_logits, batch.labels, e.confusion);
    seen += batch.labels.numel();
    if (progress) progress(seen);
  }
  e.loss = seen ? total_loss / seen : 0;
  e.accuracy = seen ? static_cast<double>(correct) / seen : 0;
  e.topk_accuracy = seen ? static_cast<double>(correct_k) / seen : 0;
  return e;
}

Trainer::Trainer(TrainConfig config, TrainObserver* observer) : config_(std::move(config)), observer_(observer) {}

Trainer::~Trainer() {
  if (thread_.joinable()) {
    cancel();
    thread_.join();
  }
}

RunEnd Trainer::run() {
  RunEnd end;
  try {
    end = train();
  } catch (const std::bad_alloc&) {
    // The run's tensors are gone, their blocks given back, before what is available is read again for the words:
    // what the run needs and the batch size that fits.
    allocator_for(memory_device_).empty_cache();
    end = {RunStatus::Failed, "out of memory" + memory_advice_text()};
  } catch (const std::exception& e) {
    end = {RunStatus::Failed, e.what()};
    // The device's message says how much was asked for and held; the run's says which setting to change.
    if (end.reason.find("out of GPU memory") != std::string::npos)
      end.reason += memory_input_
                        ? " [" + memory_advice_text().substr(2) + "]"
                        : " [--batch-size " + std::to_string(config_.batch_size) + " does not fit on this GPU: try " +
                              std::to_string(std::max(2, config_.batch_size / 2)) + "]";
  }
  Report{observer_}(&TrainObserver::on_end, end);
  return end;
}

void Trainer::start() {
  AMPWB_CHECK(!thread_.joinable(), "this trainer has already started");
  thread_ = std::thread([this] { result_ = run(); });
}

RunEnd Trainer::wait() {
  if (thread_.joinable()) thread_.join();
  return result_;
}

void Trainer::pause() { paused_ = true; }

void Trainer::resume() {
  std::lock_guard lock(mutex_);
  paused_ = false;
  resumed_.notify_all();
}

void Trainer::stop() {
  std::lock_guard lock(mutex_);
  stop_ = true;
  resumed_.notify_all();
}

void Trainer::cancel() {
  std::lock_guard lock(mutex_);
  cancel_ = true;
  resumed_.notify_all();
}

bool Trainer::wait_while_paused() {
  std::unique_lock lock(mutex_);
  resumed_.wait(lock, [this] { return !paused_ || stop_ || cancel_; });
  return !stop_ && !cancel_;
}

std::string Trainer::memory_advice_text() const {
  if (!memory_input_) return " before the run's memory was estimated";
  const size_t available = memory_device_.is_cpu() ? available_host_memory() : memory_available_;
  return ": this run " + memory_advice(*memory_input_, estimate_training_memory(*memory_input_), available);
}

ModeSupport Trainer::check_precision(const Backend& backend) const {
  ModeSupport support = mode_support(config_.precision.mode, backend.capabilities());
  if (!support.supported) throw Error(support.reason);
  return support;
}

std::string Trainer::checkpoint_path() const {
  return config_.checkpoint_dir.empty() ? std::string()
                                        : (std::filesystem::path(config_.checkpoint_dir) / "checkpoint.ampwb").string();
}

namespace {

// Where a run stands inside an epoch: what a checkpoint must carry to continue the same curves.
struct EpochProgress {
  int epoch = 1;
  int64_t next_step = 0;  // within the epoch (the loader's order comes from the seed and the epoch)
  double loss_sum = 0, data_wait = 0, compute = 0;
  int64_t seen = 0, correct = 0, skipped = 0;
  double wall_before = 0;  // the run's wall-clock seconds in the processes before this one: a resumed clock goes on
  double seconds_before = 0;  // this epoch's seconds in the processes before this one: its time and images/s span
                              // the same steps as its sums
};

// Checkpoints hold host tensors whatever the device: one written on a GPU resumes on the CPU and the other way.
Checkpoint make_checkpoint(Backend& backend, const TrainConfig& config, const EpochProgress& at, double wall_seconds,
                           int64_t global_step, int64_t consecutive_skipped, ResNet& model, Optimizer& optimizer,
                           const LossScaler& scaler) {
  Checkpoint c;
  const LossScaler::State s = scaler.state();
  c.meta = {{"version", 1},
            {"config", config},
            {"epoch", at.epoch},
            {"next_step", at.next_step},
            {"global_step", global_step},
            {"consecutive_skipped", consecutive_skipped},
            {"partial", {at.loss_sum, at.data_wait, at.compute, at.seen, at.correct, at.skipped}},
            {"scaler", {s.scale, s.growth_tracker, s.hysteresis_left}},
            {"optimizer_steps", optimizer.steps_taken()},
            {"wall_seconds", wall_seconds},
            {"epoch_seconds", at.seconds_before}};
  for (Parameter* p : model.parameters()) c.tensors.emplace_back("param/" + p->name, on_host(backend, p->value));
  std::vector<Buffer*> buffers;
  model.collect_buffers(buffers);
  for (Buffer* b : buffers) c.tensors.emplace_back("buffer/" + b->name, on_host(backend, b->value));
  for (auto& [key, t] : optimizer.state()) c.tensors.emplace_back("optimizer/" + key, on_host(backend, t));
  return c;
}

void copy_into(Backend& backend, const Tensor& from, Tensor& to, const std::string& name) {
  AMPWB_CHECK(from.shape() == to.shape() && from.dtype() == to.dtype(),
              "checkpoint tensor " << name << " is " << from.describe() << ", the model expects " << to.describe());
  if (to.device().is_cpu())
    std::memcpy(to.data(), from.data(), to.nbytes());
  else
    backend.convert(from, to);
}

void restore_checkpoint(Backend& backend, const Checkpoint& c, const TrainConfig& config, EpochProgress& at,
                        int64_t& global_step, int64_t& consecutive_skipped, ResNet& model, Optimizer& optimizer,
                        LossScaler& scaler) {
  const TrainConfig saved = c.meta.at("config").get<TrainConfig>();
  AMPWB_CHECK(saved.depth == config.depth && saved.precision.mode == config.precision.mode &&
                  saved.batch_size == config.batch_size && saved.seed == config.seed,
              "the checkpoint belongs to another configuration (ResNet-"
                  << saved.depth << ", " << mode_name(saved.precision.mode) << ", batch " << saved.batch_size << ")");
  for (Parameter* p : model.parameters()) {
    copy_into(backend, c.tensor("param/" + p->name), p->value, p->name);
    p->changed();  // the low-precision copies follow the restored master weights
  }
  std::vector<Buffer*> buffers;
  model.collect_buffers(buffers);
  for (Buffer* b : buffers) copy_into(backend, c.tensor("buffer/" + b->name), b->value, b->name);
  for (const auto& [name, t] : c.tensors)
    if (name.starts_with("optimizer/")) optimizer.state()[name.substr(10)] = on_device(backend, t.clone());
  optimizer.set_steps_taken(c.meta.at("optimizer_steps"));
  const auto& s = c.meta.at("scaler");
  scaler.load_state({s.at(0), s.at(1), s.at(2)});
  at.epoch = c.meta.at("epoch");
  at.next_step = c.meta.at("next_step");
  const auto& p = c.meta.at("partial");
  at.loss_sum = p.at(0);
  at.data_wait = p.at(1);
  at.compute = p.at(2);
  at.seen = p.at(3);
  at.correct = p.at(4);
  at.skipped = p.at(5);
  at.wall_before = c.meta.value("wall_seconds", 0.0);  // checkpoints before 2026-11-24 hold none
  // Checkpoints before 2026-12-01 hold none: the steps' own time is the closest measure of the epoch's.
  at.seconds_before = c.meta.value("epoch_seconds", at.compute + at.data_wait);
  global_step = c.meta.at("global_step");
  consecutive_skipped = c.meta.at("consecutive_skipped");
}

}  // namespace

RunEnd Trainer::train() {
  const TrainConfig& config = config_;
  validate(config);
  const Report report{observer_};
  const auto run_start = Clock::now();
  std::unique_ptr<Backend> made =
      make_backend(config.device, {config.threads, CpuBf16::Auto, config.precision.mode == PrecisionMode::Tf32,
                                   conv_algorithm_named(config.conv_algorithm)});
  if (decorate_backend_) made = decorate_backend_(std::move(made));
  // Every op of a training step timed by class (on a GPU, a sample of the steps): where the time went.
  const auto backend = std::make_unique<ProfiledBackend>(std::move(made));
  StepTimer step_timer(*backend);
  const ModeSupport precision = check_precision(*backend);
  const Dataset dataset =
      Dataset::open(config.data_dir, {config.data.validation_fraction, config.seed, config.data.max_train_images, "",
                                      config.data.max_validation_images});
  const int image_size = config.image_size > 0 ? config.image_size : std::min(224, dataset.native_image_size());
  const int threads = config.threads > 0 ? config.threads : static_cast<int>(std::thread::hardware_concurrency());
  LoaderOptions loading;
  loading.image_size = image_size;
  loading.batch_size = config.batch_size;
  loading.augment = config.data.augment;
  loading.drop_last = config.data.drop_last;
  loading.seed = config.seed;
  loading.threads = config.data.loader_threads > 0 ? config.data.loader_threads : std::min(threads, kMaxLoaderThreads);
  loading.cache_budget_bytes = static_cast<size_t>(config.data.cache_budget_mb) << 20;
  loading.normalization = config.data.normalization;
  validate_for_data(config, static_cast<int64_t>(dataset.class_names().size()), dataset.size(Split::Train));
  // The run's memory, estimated before anything is allocated or recorded: a run that cannot fit is refused here.
  const MemoryEstimateInput memory_input = memory_estimate_input(
      config, image_size, static_cast<int>(dataset.class_names().size()), backend->capabilities());
  const MemoryEstimate memory = estimate_training_memory(memory_input);
  const size_t available = available_memory(*backend);
  memory_input_ = memory_input;
  memory_device_ = backend->device();
  memory_available_ = available;
  refuse_what_cannot_fit(memory_input, memory, available, "run");
  DataLoader train_data(dataset, Split::Train, loading);
  loading.shuffle = loading.augment = loading.drop_last = false;
  DataLoader validation_data(dataset, Split::Validation, loading);

  std::optional<Checkpoint> resume;
  std::string resume_note;  // set when the checkpoint was damaged and its predecessor is used
  if (!config.resume_from.empty()) resume = load_checkpoint_or_previous(config.resume_from, &resume_note);
  Rng rng(config.seed);
  ResNetConfig model_config{config.depth, static_cast<int>(dataset.class_names().size()), 3, image_size, config.stem};
  ResNet model(*backend, model_config, rng);
  auto optimizer = make_optimizer(*backend, config.optimizer);
  const PrecisionPolicy policy(config.precision);
  LossScaler scaler(config.precision.loss_scale);
  MixedPrecisionStep step(*backend, model, *optimizer, policy, scaler, config.label_smoothing, config.grad_clip_norm);
  GradientProbe probe, numerics_probe(false);
  const StepPlan plan = plan_steps(step, backend->device(), config.host_sync, config.cuda_graphs);
  const bool deferred = plan.deferred;

  int64_t steps_per_epoch = train_data.batches_per_epoch();
  if (config.max_steps_per_epoch > 0) steps_per_epoch = std::min(steps_per_epoch, config.max_steps_per_epoch);
  AMPWB_CHECK(steps_per_epoch >= 1,
              "the training split (" << train_data.size() << " images) holds no full batch of " << config.batch_size);
  const LrSchedule lr_schedule({config.schedule, config.lr, steps_per_epoch * config.epochs,
                                steps_per_epoch * config.warmup_epochs, std::max<int64_t>(1, steps_per_epoch * 30)});
  const int topk = config.topk;

  EpochProgress at;
  int64_t global_step = 0, consecutive_skipped = 0;
  if (resume)
    restore_checkpoint(*backend, *resume, config, at, global_step, consecutive_skipped, model, *optimizer, scaler);

  RunInfo info;
  info.model_summary = model.summary();
  info.backend_description = backend->description();
  info.precision_summary = policy.describe();
  info.image_size = image_size;
  info.train_images = train_data.size();
  info.validation_images = validation_data.size();
  info.class_names = dataset.class_names();
  info.dataset_layout = dataset.report().layout;
  info.dataset_fingerprint = dataset.fingerprint();
  info.steps_per_epoch = steps_per_epoch;
  info.first_epoch = at.epoch;
  info.first_step = global_step;
  info.compute = precision.compute;
  info.memory = memory_summary(memory, available);
  info.notes = precision.notes;
  if (!resume_note.empty()) info.notes.push_back(resume_note);
  if (const size_t skipped = dataset.report().skipped.size())
    info.notes.push_back("passed over " + std::to_string(skipped) + (skipped == 1 ? " file" : " files") +
                         " that cannot be trained on (ampwb dataset inspect " + config.data_dir +
                         " lists each with its reason)");
  if (validation_data.size() == 0) info.notes.push_back("no validation images: validation is not measured");
  if (const int64_t all = dataset.report().validation_images_before_limit; all > validation_data.size())
    info.notes.push_back("validated on " + counted(validation_data.size()) + " of " + counted(all) +
                         " images, the same ones every epoch (Validation images in the workbench, --max-val-images "
                         "in ampwb train; 0: all)");
  if (deferred)
    info.notes.push_back(
        "no step waits for the device: each step's numbers are read one step later, and a skipped "
        "step does not name the layers that overflowed (--host-sync every-step does)");
  if (plan.captured && backend->device().is_cpu())
    info.notes.push_back("--cuda-graphs on captures no step on a CPU: each is timed for the time breakdown, op by op");
  else if (plan.captured)
    info.notes.push_back("each batch shape's step is captured as a CUDA graph after its first " +
                         std::to_string(MixedPrecisionStep::kEagerSteps) +
                         " steps and replayed (--cuda-graphs off runs every step op by op); the steps sampled for "
                         "the time breakdown run op by op");
  if (!deferred && !backend->device().is_cpu()) {
    const std::string why_every_step = step.why_not_deferred();
    info.notes.push_back("every step waits once for the GPU: " +
                         (why_every_step.empty() ? std::string("--host-sync every-step") : why_every_step));
  }
  if (!config.checkpoint_dir.empty()) require_writable_folder(config.checkpoint_dir);
  report(&TrainObserver::on_start, info);

  const double wall_before = at.wall_before;
  auto wall_seconds = [&] { return wall_before + seconds_since(run_start); };
  auto save = [&](const EpochProgress& progress) {
    if (config.checkpoint_dir.empty()) return std::string();
    std::filesystem::create_directories(config.checkpoint_dir);
    save_checkpoint(checkpoint_path(), make_checkpoint(*backend, config, progress, wall_seconds(), global_step,
                                                       consecutive_skipped, model, *optimizer, scaler));
    report(&TrainObserver::on_checkpoint, CheckpointInfo{progress.epoch, global_step, checkpoint_path()});
    return "; resumable from " + checkpoint_path();
  };
  const bool recovers_from_overflow = scaler.dynamic();
  // A step's result, as the host learns it: reported, checked, added to the epoch's sums. Ends the run where it
  // must stop.
  struct Launched {
    int epoch = 0;
    int64_t global_step = 0, b = 0;
    float lr = 0;
    int64_t images = 0;
    GradientProbe* probe = nullptr;
  };
  auto settle = [&](const Launched& s, const StepResult& r) -> std::optional<RunEnd> {
    report(&TrainObserver::on_step, StepReport{s.epoch, s.global_step, r.loss, static_cast<float>(r.correct) / s.images,
                                               s.lr, r.loss_scale, r.skipped, r.grad_norm, wall_seconds()});
    // After its on_step: the store's resume logic keys a run's details on the steps it holds.
    if (r.skipped)
      report(&TrainObserver::on_overflow, OverflowReport{s.epoch, s.global_step, r.loss_scale, r.overflow.layers,
                                                         r.overflow.nonfinite_values, r.overflow.finite_norm});
    if (s.probe)
      report(&TrainObserver::on_layer_numerics, s.probe->layers().take(s.epoch, s.global_step, r.loss_scale));
    const std::string where = " at epoch " + std::to_string(s.epoch) + ", step " + std::to_string(s.b);
    if (!std::isfinite(r.loss) && !recovers_from_overflow)
      return RunEnd{RunStatus::Failed, "the loss became " + std::to_string(r.loss) + where + " in " +
                                           mode_name(config.precision.mode) +
                                           " without dynamic loss scaling: the run cannot "
                                           "recover (lower the learning rate, or use a loss scaler)"};
    if (scaler.collapsed())
      return RunEnd{RunStatus::Failed, "the loss scale sits at its minimum (" +
                                           std::to_string(config.precision.loss_scale.min_scale) +
                                           ") and gradients still overflow" + where};
    consecutive_skipped = r.skipped ? consecutive_skipped + 1 : 0;
    if (consecutive_skipped >= config.max_consecutive_skipped)
      return RunEnd{RunStatus::Failed, std::to_string(consecutive_skipped) +
                                           " steps in a row had inf/NaN gradients and were skipped" + where +
                                           "; the loss scale fell to " + std::to_string(scaler.scale())};
    at.skipped += r.skipped;
    if (std::isfinite(r.loss)) {
      at.loss_sum += static_cast<double>(r.loss) * s.images;
      at.correct += r.correct;
      at.seen += s.images;
    }
    return std::nullopt;
  };
  // With deferred steps, the last one queued, whose result the host has not read yet.
  Launched pending;
  auto settle_pending = [&]() -> std::optional<RunEnd> {
    if (std::optional<StepResult> r = step.finish_deferred()) return settle(pending, *r);
    return std::nullopt;
  };
  // Images whose files vanish, shrink or change during the run: noted each epoch, the run stopped past a tenth.
  LostImageWatch lost_images(train_data, validation_data, config.data_dir);
  const auto note_lost = [&](int epoch) {
    if (std::optional<std::string> note = lost_images.note(epoch)) report(&TrainObserver::on_note, *note);
  };
  // A batch on the backend's device. Batch b+1 is taken from the loader and sent up before step b is queued, so
  // that on a GPU its copy overlaps step b (Backend::upload); on the CPU it is the loader's batch itself.
  struct DeviceBatch {
    Tensor images, labels;
  };
  Batch batch;
  for (; at.epoch <= config.epochs; ++at.epoch, at = EpochProgress{at.epoch}) {
    const int epoch = at.epoch;
    allocator_for(backend->device()).reset_peak();
    const auto epoch_start = Clock::now();
    // Where the epoch stands for a checkpoint taken now: its time so far, over every process it ran in.
    const auto so_far = [&] {
      EpochProgress now = at;
      now.seconds_before += seconds_since(epoch_start);
      return now;
    };
    MachineLoadMeter load_meter;  // what else the machine does during this epoch's steps
    train_data.start_epoch(epoch);
    for (int64_t skip = 0; skip < at.next_step; ++skip) train_data.next(batch);  // resuming mid-epoch
    const double wait_before = at.data_wait - train_data.wait_seconds();
    // The loader passes over a batch whose every image was lost: the epoch then ends a step early, and only then.
    auto fetch = [&](int64_t b) {
      if (train_data.next(batch)) return DeviceBatch{backend->upload(batch.images), backend->upload(batch.labels)};
      AMPWB_CHECK(train_data.stats().lost > 0, "the data loader ended early at epoch " << epoch << ", step " << b);
      return DeviceBatch{};
    };
    DeviceBatch next;
    const int64_t first_step = at.next_step, replayed_before = step.replayed_steps();
    for (; at.next_step < steps_per_epoch; ++at.next_step, ++global_step) {
      const int64_t b = at.next_step;
      if (cancel_) return {RunStatus::Cancelled, "cancelled by the user"};
      if (paused_) wait_while_paused();
      if (cancel_) return {RunStatus::Cancelled, "cancelled by the user"};
      if (stop_) {
        if (std::optional<RunEnd> end = settle_pending()) return *end;
        return {RunStatus::Cancelled, "stopped by the user at epoch " + std::to_string(epoch) + ", step " +
                                          std::to_string(b) + save(so_far())};
      }
      if (std::optional<std::string> lost = lost_images.too_many()) {
        if (std::optional<RunEnd> end = settle_pending()) return *end;
        note_lost(epoch);
        return {RunStatus::Failed, *lost + save(so_far())};
      }
      // The paper's histogram and the per-layer numerics on the last step of each epoch; the numerics also every
      // numerics_every steps, through a probe without histograms so that they stay one step's. Probed steps do
      // host work no other step does: they are left out of the time breakdown.
      const bool last_of_epoch = b == steps_per_epoch - 1;
      const bool numerics_due = config.numerics_every > 0 && (global_step + 1) % config.numerics_every == 0;
      GradientProbe* const step_probe = last_of_epoch ? &probe : numerics_due ? &numerics_probe : nullptr;
      const bool timed = step_timer.begin(b, steps_per_epoch, step_probe != nullptr, train_data.wait_seconds());
      step.set_capture(plan.captured && !timed);  // a timed step's ops are timed one by one
      const DeviceBatch current = next.images.defined() ? std::move(next) : fetch(b);
      if (!current.images.defined()) {
        step_timer.discard();
        break;
      }
      next = b + 1 < steps_per_epoch ? fetch(b + 1) : DeviceBatch{};
      at.data_wait = wait_before + train_data.wait_seconds();
      const Tensor& images = current.images;
      const Tensor& labels = current.labels;
      if (images.n() < 2) {  // batch norm cannot train on a single sample
        step_timer.discard();
        continue;
      }
      const auto compute_start = Clock::now();
      const Launched launched{epoch, global_step, b, lr_schedule.at(global_step), images.n(), step_probe};
      std::optional<StepResult> result;  // this step's, or with deferred steps the one before's
      Launched result_of = launched;
      if (deferred && !step_probe) {
        result = step.run_deferred(images, labels, launched.lr);
        result_of = pending;
        pending = launched;
      } else {
        if (std::optional<RunEnd> end = settle_pending()) return *end;  // a probed step needs the host
        result = step.run(images, labels, launched.lr, step_probe);
      }
      at.compute += seconds_since(compute_start);
      step_timer.end(train_data.wait_seconds());
      if (result)
        if (std::optional<RunEnd> end = settle(result_of, *result)) return *end;
    }
    if (std::optional<RunEnd> end = settle_pending()) return *end;
    for (const GradientHistogram& h : probe.take(epoch, scaler.scale())) report(&TrainObserver::on_histogram, h);
    if (cancel_) return {RunStatus::Cancelled, "cancelled by the user"};
    const double train_seconds = at.seconds_before + seconds_since(epoch_start);
    const MachineLoad load = load_meter.stop();
    const auto validation_start = Clock::now();
    const Evaluation val = evaluate(model, *backend, validation_data, topk, [&](int64_t done) {
      report(&TrainObserver::on_validation,
             ValidationProgress{epoch, done, validation_data.size(), seconds_since(validation_start)});
    });
    note_lost(epoch);
    EpochReport er;
    er.epoch = epoch;
    er.topk = topk;
    er.train_loss = at.seen ? at.loss_sum / at.seen : 0;
    er.train_accuracy = at.seen ? static_cast<double>(at.correct) / at.seen : 0;
    er.validation_loss = val.loss;
    er.validation_accuracy = val.accuracy;
    er.validation_topk = val.topk_accuracy;
    // Both over the whole epoch, a resumed one's earlier process included, as the sums of its steps are.
    er.seconds = at.seconds_before + seconds_since(epoch_start);
    er.images_per_second = train_seconds > 0 ? at.seen / train_seconds : 0;
    er.data_wait_seconds = at.data_wait;
    er.compute_seconds = at.compute;
    er.skipped_steps = at.skipped;
    er.loss_scale = scaler.scale();
    er.peak_bytes = allocator_for(backend->device()).stats().peak_live_bytes;
    if (!val.confusion.empty())
      report(&TrainObserver::on_confusion,
             ConfusionMatrix{epoch, static_cast<int64_t>(dataset.class_names().size()), val.confusion});
    epochs_.push_back(er);
    if (EpochTimes times = step_timer.take(epoch); times.steps > 0) {
      times.replayed = static_cast<double>(step.replayed_steps() - replayed_before) /
                       static_cast<double>(std::max<int64_t>(1, steps_per_epoch - first_step));
      if (plan.captured) times.why_not_captured = step.why_not_captured();
      times.load = load;
      report(&TrainObserver::on_epoch_times, times);
    }
    report(&TrainObserver::on_epoch, er);
    const std::string resumable = save(EpochProgress{epoch + 1});  // resumes at the next epoch
    if (std::optional<std::string> lost = lost_images.too_many()) return {RunStatus::Failed, *lost + resumable};
    if (stop_ && epoch < config.epochs)
      return {RunStatus::Cancelled, "stopped by the user after epoch " + std::to_string(epoch) + resumable};
  }
  // The precision divergence, once, from the final weights and the last batch trained on (or the first of an
  // epoch, when a resumed run had no step left to take). FP32 is its own reference; TF32 is the backend's math.
  if (policy.low() != DType::F32 && !cancel_) {
    if (!batch.images.defined() || batch.images.n() < 2) {
      train_data.start_epoch(config.epochs);
      AMPWB_CHECK(train_data.next(batch), "the data loader has no batch for the precision divergence");
    }
    if (batch.images.n() >= 2) {
      backend->set_enabled(false);  // two extra steps, in no epoch's time breakdown
      PrecisionDivergence divergence = measure_divergence(*backend, model, policy, batch.images, batch.labels,
                                                          {scaler.scale(), config.label_smoothing});
      divergence.epoch = config.epochs;
      divergence.step = global_step;
      report(&TrainObserver::on_divergence, divergence);
    }
  }
  return {RunStatus::Finished, ""};
}

EpochReport train(const TrainConfig& config, TrainObserver* observer) {
  Trainer trainer(config, observer);
  const RunEnd end = trainer.run();
  if (end.status != RunStatus::Finished) throw Error(end.reason);
  AMPWB_CHECK(!trainer.epochs().empty(), "the run finished without an epoch");
  return trainer.epochs().back();
}

}  // namespace ampwb
