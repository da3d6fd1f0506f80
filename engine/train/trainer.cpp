// The training loop and its controls.
#include "train/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <optional>
#include <set>

#include "amp/fp8_scaling.h"
#include "core/error.h"
#include "core/setting_error.h"
#include "core/shell_word.h"
#include "dist/collective_timeout.h"
#include "nn/batchnorm2d.h"
#include "nn/conv2d.h"
#include "nn/linear.h"
#include "optim/lr_schedule.h"
#include "train/benchmark.h"
#include "train/checkpoint.h"
#include "train/checkpoint_folder_lock.h"
#include "train/divergence_step.h"
#include "train/lost_images.h"
#include "train/memory_estimate.h"
#include "train/model_weights.h"
#include "train/step_timer.h"
#include "train/topk.h"

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

const char* run_status_words(RunStatus s) { return s == RunStatus::Cancelled ? "stopped" : run_status_name(s); }

std::string run_end_words(RunStatus s, const std::string& reason) {
  const std::string words = run_status_words(s);
  if (reason.empty() || reason == words) return words;
  if (reason.starts_with(words + " ")) return reason;
  return words + ": " + reason;
}

Evaluation evaluate(ResNet& model, Backend& backend, DataLoader& data, int topk,
                    const std::function<void(int64_t images_done)>& progress, Communicator* communicator) {
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
  if (communicator && communicator->world_size() > 1) {  // each rank's shard summed: the whole split's counts
    int64_t counts[] = {correct, correct_k, seen};
    communicator->all_reduce_sum(counts, 3);
    correct = counts[0], correct_k = counts[1], seen = counts[2];
    communicator->all_reduce_sum(&total_loss, 1);
    communicator->all_reduce_sum(e.confusion.data(), e.confusion.size());
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
  } catch (const SettingError& e) {  // a setting the data or the device refused: the front end names it its way
    end = {RunStatus::Failed, e.what(), e.setting()};
  } catch (const RankLostError& e) {  // another rank hung or stopped: the run goes on from its last checkpoint
    end = {RunStatus::Interrupted, e.what()};
  } catch (const std::exception& e) {
    end = {RunStatus::Failed, e.what()};
    // The device's message says how much was asked for and held; the run's says which setting to change.
    if (end.reason.find("out of GPU memory") != std::string::npos)
      end.reason += memory_input_ ? " [" + memory_advice_text().substr(2) + "]"
                                  : " [a batch size of " + std::to_string(config_.batch_size) +
                                        " does not fit on this GPU: try " +
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
  ModeSupport support = mode_support(config_.precision, backend.capabilities());
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

// amp-fp8's scalings of every FP8 layer, named "<layer>.input", "<layer>.weight", "<layer>.output_grad" in model
// order; none in other modes.
std::vector<std::pair<std::string, Fp8TensorScaling*>> fp8_scalings(ResNet& model) {
  std::vector<std::pair<std::string, Fp8TensorScaling*>> out;
  model.visit([&](Layer& layer) {
    Fp8LayerScaling* s = layer.fp8_scaling();
    if (!s) return;
    auto* conv = dynamic_cast<Conv2d*>(&layer);
    auto* linear = dynamic_cast<Linear*>(&layer);
    AMPWB_CHECK(conv || linear, "an FP8 layer is a convolution or a linear layer");
    std::string name = conv ? conv->weight().name : linear->weight().name;
    name.resize(name.size() - std::string(".weight").size());
    out.emplace_back(name + ".input", &s->input);
    out.emplace_back(name + ".weight", &s->weight);
    out.emplace_back(name + ".output_grad", &s->output_grad);
  });
  return out;
}

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
  // FP8's delayed scaling: each tensor's amax history and scale, so that a resumed run casts as this one would.
  const auto named_scalings = fp8_scalings(model);
  std::vector<Fp8TensorScaling*> scalings;
  for (const auto& [name, scaling] : named_scalings) scalings.push_back(scaling);
  Fp8TensorScaling::fetch_all(backend, scalings);  // the steps before have queued their updates
  for (const auto& [name, scaling] : named_scalings) {
    const DelayedScalingState s = scaling->scaling().state();
    const auto length = static_cast<int64_t>(s.amax_history.size());
    c.tensors.emplace_back("fp8/" + name + ".amax_history", tensor_from_floats(s.amax_history, {length}));
    c.tensors.emplace_back("fp8/" + name + ".scale", tensor_from_floats({s.scale}, {1}));
  }
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
  for (const auto& [name, scaling] : fp8_scalings(model))
    scaling->restore(backend, {to_float_vector(c.tensor("fp8/" + name + ".amax_history")),
                               to_float_vector(c.tensor("fp8/" + name + ".scale")).at(0)});
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

// One call of train(): the state its phases share. The members are built in the order they are declared, each from
// those above it, so that a run is refused (settings, precision, memory) before its data loaders start.
class Trainer::Run {
 public:
  explicit Run(Trainer& trainer);  // set-up: the backend, the data, the memory check, the model and its step
  void resume();                   // the model, optimizer, scaler and progress from the checkpoint, if any
  void report_start();             // what the run is, with its notes, to the observer
  std::optional<RunEnd> epochs();  // the epoch loop; how the run ended when it ended early
  void finish();                   // the precision divergence, once, from the final weights

 private:
  // A batch on the backend's device. Batch b+1 is taken from the loader and sent up before step b is queued, so
  // that on a GPU its copy overlaps step b (Backend::upload); on the CPU it is the loader's batch itself.
  struct DeviceBatch {
    Tensor images, labels;
  };
  // A step's result, as the host learns it, is settled with what was known when the step was queued.
  struct Launched {
    int epoch = 0;
    int64_t global_step = 0, b = 0;
    float lr = 0;
    int64_t images = 0;
    GradientProbe* probe = nullptr;
  };
  // When an epoch's steps began, for its time, its machine load and the share of its steps replayed.
  struct EpochStart {
    Clock::time_point time;
    MachineLoadMeter load;  // what else the machine, and the run's GPU, do during this epoch's steps
    int64_t first_step = 0, replayed_before = 0;
  };

  static std::unique_ptr<ProfiledBackend> profiled_backend(const Trainer& trainer);
  MemoryEstimate check_memory();  // refuses a run that cannot fit; reads only the members declared above memory_

  std::optional<RunEnd> train_epoch(const EpochStart& start);
  std::optional<RunEnd> interruption(int64_t b, const EpochStart& start);
  GradientProbe* probe_for(int64_t b);
  DeviceBatch fetch(int64_t b);
  std::optional<RunEnd> take_step(int64_t b, const DeviceBatch& batch, GradientProbe* probe);
  std::optional<RunEnd> settle(const Launched& s, const StepResult& r);
  std::optional<RunEnd> settle_pending();
  std::optional<RunEnd> end_epoch(const EpochStart& start);
  EpochReport epoch_report(const Evaluation& val, double train_seconds, const EpochStart& start) const;
  EpochProgress so_far(const EpochStart& start) const;  // for a checkpoint taken now, over every process it ran in
  std::string save(const EpochProgress& progress);      // "; resumable from PATH", or nothing without checkpoints
  double wall_seconds() const { return wall_before_ + seconds_since(run_start_); }
  // This process's seconds of the epoch begun at `start`, less those spent paused: its time and speed are training's.
  double epoch_seconds(const EpochStart& start) const { return seconds_since(start.time) - paused_in_epoch_; }
  void note_lost(int epoch);
  // The CPU share this run's other processes on this machine used since `meter` started (all ranks call it together).
  double siblings_cpu_share(const MachineLoadMeter& meter) const;
  // Data-parallel runs: the reducer attached to the step (null alone); whether any rank says `mine`, agreed so that
  // every rank takes the same steps; whether this process is rank 0, which alone reports and checkpoints.
  std::unique_ptr<GradientReducer> distribute();
  bool any_rank(bool mine) const;
  bool leader() const { return !communicator_ || communicator_->rank() == 0; }
  bool reports_topk() const {
    return topk_meaningful(config_.topk, static_cast<int64_t>(dataset_.class_names().size()));
  }

  Trainer& trainer_;
  const TrainConfig& config_;
  Communicator* const communicator_;  // null: this process alone
  const Report report_;
  const Clock::time_point run_start_ = Clock::now();
  // Every op of a training step timed by class (on a GPU, a sample of the steps): where the time went.
  const std::unique_ptr<ProfiledBackend> backend_;
  StepTimer step_timer_;
  const ModeSupport precision_;
  const Dataset dataset_;
  const int image_size_;
  const LoaderOptions loading_;
  const MemoryEstimate memory_;  // estimated before anything is allocated or recorded
  // The leader's hold on the checkpoint folder, from before the checkpoint to resume from is read to the run's end.
  const CheckpointFolderLock checkpoint_folder_;
  DataLoader train_data_, validation_data_;
  std::string resume_note_;                     // set when the checkpoint was damaged and its predecessor is used
  const std::optional<Checkpoint> checkpoint_;  // read before the model is built, restored by resume()
  Rng rng_;
  ResNet model_;
  const std::unique_ptr<Optimizer> optimizer_;
  const PrecisionPolicy policy_;
  LossScaler scaler_;
  MixedPrecisionStep step_;
  const std::unique_ptr<GradientReducer> reducer_;
  GradientProbe probe_, numerics_probe_{false};
  const StepPlan plan_;
  const int64_t steps_per_epoch_;
  const LrSchedule lr_schedule_;
  EpochProgress at_;
  int64_t global_step_ = 0, consecutive_skipped_ = 0;
  double wall_before_ = 0;  // the run's wall-clock seconds before this process, from the checkpoint
  double paused_in_epoch_ = 0;  // seconds the user paused the current epoch
  bool checkpoint_failed_ = false;  // a checkpoint could not be written: said once, in a note
  Launched pending_;        // with deferred steps, the last one queued, whose result the host has not read yet
  // Images whose files vanish, shrink or change during the run: noted each epoch, the run stopped past a tenth.
  LostImageWatch lost_images_;
  Batch batch_;  // the loader's last batch, which the precision divergence reuses
};

RunEnd Trainer::train() {
  validate(config_);
  Run run(*this);
  run.resume();
  run.report_start();
  if (std::optional<RunEnd> end = run.epochs()) return *end;
  run.finish();
  return {RunStatus::Finished, ""};
}

namespace {
LoaderOptions training_loader_options(const TrainConfig& config, int image_size) {
  const int threads = config.threads > 0 ? config.threads : static_cast<int>(std::thread::hardware_concurrency());
  LoaderOptions loading;
  loading.image_size = image_size;
  loading.batch_size = config.batch_size;
  loading.augment = config.data.augment;
  loading.drop_last = config.data.drop_last;
  loading.seed = config.seed;
  loading.threads = config.data.loader_threads > 0 ? config.data.loader_threads : std::min(threads, kMaxLoaderThreads);
  loading.cache_budget_bytes = static_cast<size_t>(config.data.cache_budget_mb) << 20;
  loading.normalization = choice_name(config.data.normalization);
  return loading;
}

// Each rank's shard of every epoch (data/shard.h); validation keeps it.
LoaderOptions sharded(LoaderOptions loading, const Communicator* communicator) {
  if (communicator) loading.shard = {communicator->rank(), communicator->world_size()};
  return loading;
}

LoaderOptions validation_loader_options(LoaderOptions loading) {
  loading.shuffle = loading.augment = loading.drop_last = false;
  return loading;
}

// The checkpoint to resume from, read by rank 0 alone and sent to the other ranks: on several machines the
// checkpoint folder may be rank 0's own disk, and every rank must start from the same file. A checkpoint rank 0 cannot
// read fails every rank, rank 0 with the reason.
std::optional<Checkpoint> checkpoint_to_resume(const TrainConfig& config, std::string* note, Communicator* world) {
  if (config.resume_from.empty()) return std::nullopt;
  if (!world) return load_checkpoint_or_previous(config.resume_from, note);
  std::optional<Checkpoint> read;
  std::string header;  // the metadata, and each tensor's name, dtype, layout and shape
  if (world->rank() == 0) {
    try {
      read = load_checkpoint_or_previous(config.resume_from, note);
    } catch (...) {
      int64_t failed = 0;
      world->broadcast(&failed, sizeof failed, 0);
      throw;
    }
    nlohmann::json tensors = nlohmann::json::array();
    for (const auto& [name, t] : read->tensors)
      tensors.push_back({name, dtype_name(t.dtype()), static_cast<int>(t.layout()), t.shape()});
    header = nlohmann::json{{"meta", read->meta}, {"tensors", tensors}}.dump();
  }
  auto bytes = static_cast<int64_t>(header.size());
  world->broadcast(&bytes, sizeof bytes, 0);
  if (bytes == 0) throw Error("rank 0 could not read the checkpoint " + config.resume_from + " (it says why)");
  header.resize(static_cast<size_t>(bytes));
  world->broadcast(header.data(), header.size(), 0);
  if (world->rank() != 0) {
    const nlohmann::json j = nlohmann::json::parse(header);
    read.emplace();
    read->meta = j.at("meta");
    for (const nlohmann::json& t : j.at("tensors"))
      read->tensors.emplace_back(t.at(0).get<std::string>(),
                                 Tensor::empty(t.at(3).get<Shape>(), *parse_dtype(t.at(1).get<std::string>()),
                                               static_cast<Layout>(t.at(2).get<int>())));
  }
  for (auto& [name, t] : read->tensors) world->broadcast(t.data(), t.nbytes(), 0);
  return read;
}

int64_t steps_in_epoch(const TrainConfig& config, const DataLoader& train_data) {
  int64_t steps = train_data.batches_per_epoch();
  if (config.max_steps_per_epoch > 0) steps = std::min(steps, config.max_steps_per_epoch);
  AMPWB_CHECK(steps >= 1,
              "the training split (" << train_data.size() << " images) holds no full batch of " << config.batch_size);
  return steps;
}
}  // namespace

// Set-up.

Trainer::Run::Run(Trainer& trainer)
    : trainer_(trainer),
      config_(trainer.config_),
      communicator_(trainer.communicator_ && trainer.communicator_->world_size() > 1 ? trainer.communicator_ : nullptr),
      report_{leader() ? trainer.observer_ : nullptr},
      backend_(profiled_backend(trainer)),
      step_timer_(*backend_),
      precision_(trainer.check_precision(*backend_)),
      dataset_(
          Dataset::open(config_.data_dir, {config_.data.validation_fraction, config_.seed,
                                           config_.data.max_train_images, "", config_.data.max_validation_images})),
      image_size_(config_.image_size > 0 ? config_.image_size : std::min(224, dataset_.native_image_size())),
      loading_(sharded(training_loader_options(config_, image_size_), communicator_)),
      memory_(check_memory()),
      // A folder that cannot be written, or that another run writes, would cost the run its checkpoints (or the
      // other run its own): refused before the run starts, and is stored.
      checkpoint_folder_(!config_.checkpoint_dir.empty() && leader()
                             ? CheckpointFolderLock::take(config_.checkpoint_dir)
                             : CheckpointFolderLock()),
      train_data_(dataset_, Split::Train, loading_),
      validation_data_(dataset_, Split::Validation, validation_loader_options(loading_)),
      checkpoint_(checkpoint_to_resume(config_, &resume_note_, communicator_)),
      rng_(config_.seed),
      model_(*backend_,
             ResNetConfig{config_.depth, static_cast<int>(dataset_.class_names().size()), 3, image_size_, config_.stem},
             rng_),
      optimizer_(make_optimizer(*backend_, config_.optimizer)),
      policy_(config_.precision),
      scaler_(config_.precision.loss_scale),
      step_(*backend_, model_, *optimizer_, policy_, scaler_, config_.label_smoothing, config_.grad_clip_norm),
      reducer_(distribute()),
      plan_(plan_steps(step_, backend_->device(), config_.host_sync, config_.cuda_graphs)),
      steps_per_epoch_(steps_in_epoch(config_, train_data_)),
      lr_schedule_({config_.schedule, config_.lr, steps_per_epoch_ * config_.epochs,
                    steps_per_epoch_ * config_.warmup_epochs, std::max<int64_t>(1, steps_per_epoch_ * 30)}),
      lost_images_(train_data_, validation_data_, config_.data_dir) {}

std::unique_ptr<GradientReducer> Trainer::Run::distribute() {
  if (!communicator_) return nullptr;
  if (communicator_->reduces_device_memory()) {  // NCCL's collectives follow this backend's ops, on a stream beside
    void* stream = cuda_stream_of(*backend_);
    if (!stream) throw Error("data-parallel training over NCCL needs the CUDA backend, not " + backend_->description());
    communicator_->set_device_stream(stream);
  }
  if (config_.data_parallel.sync_batchnorm) {
    // Its statistics travel through the host (nn/batchnorm2d.h): a GPU would wait for each layer's at every step.
    if (!backend_->device().is_cpu())
      throw SettingError("data_parallel.sync_batchnorm",
                         "synchronised batch norm runs on CPUs only, not on " +
                             backend_->device().str() +
                             ": train without it (statistics per process, as "
                             "DistributedDataParallel by default)");
    synchronise_batch_norm(model_, [communicator = communicator_](double* data, size_t count) {
      communicator->all_reduce_sum(data, count);
    });
  }
  auto reducer =
      std::make_unique<GradientReducer>(*communicator_, model_.parameters(), config_.data_parallel.gradient_allreduce);
  std::vector<Buffer*> buffers;
  model_.collect_buffers(buffers);
  reducer->broadcast_from_rank0(buffers);
  // Batch norm synchronised over the ranks makes collectives of its own in backward: the buckets wait for its end.
  step_.set_gradient_reducer(reducer.get(), !config_.data_parallel.sync_batchnorm);
  step_timer_.set_gradient_reducer(reducer.get());
  return reducer;
}

bool Trainer::Run::any_rank(bool mine) const {
  if (!communicator_) return mine;
  int64_t ranks = mine ? 1 : 0;
  communicator_->all_reduce_sum(&ranks, 1);
  return ranks > 0;
}

std::unique_ptr<ProfiledBackend> Trainer::Run::profiled_backend(const Trainer& trainer) {
  const TrainConfig& config = trainer.config_;
  // On several GPUs, each rank's is the one its communicator (NCCL) runs on: the local rank's.
  const Communicator* world = trainer.communicator_;
  const bool rank_gpu = world && world->world_size() > 1 && world->reduces_device_memory() && !config.device.is_cpu();
  std::unique_ptr<Backend> made =
      make_backend(rank_gpu ? DeviceChoice::cuda(world->device_index()) : config.device,
                   {config.threads, CpuBf16::Auto, config.precision.mode == PrecisionMode::Tf32, config.conv_algorithm,
                    config.deterministic});
  if (trainer.decorate_backend_) made = trainer.decorate_backend_(std::move(made));
  return std::make_unique<ProfiledBackend>(std::move(made));
}

MemoryEstimate Trainer::Run::check_memory() {
  const int classes = static_cast<int>(dataset_.class_names().size());
  validate_for_data(config_, classes, dataset_.size(Split::Train));
  const MemoryEstimateInput input = memory_estimate_input(config_, image_size_, classes, backend_->capabilities());
  const MemoryEstimate memory = estimate_training_memory(input);
  const size_t available = available_memory(*backend_);
  trainer_.memory_input_ = input;
  trainer_.memory_device_ = backend_->device();
  trainer_.memory_available_ = available;
  refuse_what_cannot_fit(input, memory, available, "run");
  return memory;
}

// Resume.

void Trainer::Run::resume() {
  if (checkpoint_)
    restore_checkpoint(*backend_, *checkpoint_, config_, at_, global_step_, consecutive_skipped_, model_, *optimizer_,
                       scaler_);
  wall_before_ = at_.wall_before;
}

void Trainer::Run::report_start() {
  RunInfo info;
  info.model_summary = model_.summary();
  info.backend_description = backend_->description();
  info.precision_summary = policy_.describe();
  info.image_size = image_size_;
  info.train_images = train_data_.size();
  info.validation_images = validation_data_.size();
  info.class_names = dataset_.class_names();
  info.dataset_layout = dataset_.report().layout;
  info.steps_per_epoch = steps_per_epoch_;
  info.first_epoch = at_.epoch;
  info.first_step = global_step_;
  info.compute = precision_.compute;
  info.memory = memory_summary(memory_, trainer_.memory_available_);
  info.notes = precision_.notes;
  info.world_size = communicator_ ? communicator_->world_size() : 1;
  info.launcher = communicator_ ? trainer_.launcher_ : Launcher::Single;
  if (communicator_)
    info.notes.push_back(std::to_string(info.world_size) + " processes train together (" + communicator_->describe() +
                         "): the batch size is each one's, " + std::to_string(config_.batch_size * info.world_size) +
                         " images a step in all");
  if (config_.data_parallel.sync_batchnorm)
    info.notes.push_back(communicator_ ? "batch norm takes its statistics over every process's batch (synchronised)"
                                       : "synchronised batch norm changes nothing on one process");
  if (!resume_note_.empty()) info.notes.push_back(resume_note_);
  // The store's fingerprint (paths and sizes) refuses other data before the run starts; this one also sees a file
  // rewritten at its size, moved between classes or newly unreadable, and a copy's new times, which it cannot tell
  // apart: said, not refused.
  if (checkpoint_ && checkpoint_->meta.value("dataset", dataset_.report().fingerprint) != dataset_.report().fingerprint)
    info.notes.push_back(
        "the dataset's images changed since the checkpoint this run resumes from (rewritten, moved between classes, "
        "no longer readable, or copied, which gives them new times): its curves go on with the files as they are now");
  if (const size_t skipped = dataset_.report().skipped.size())
    info.notes.push_back("passed over " + std::to_string(skipped) + (skipped == 1 ? " file" : " files") +
                         " that cannot be trained on (ampwb dataset inspect " + shell_word(config_.data_dir) +
                         " lists each with its reason)");
  if (validation_data_.size() == 0)
    info.notes.push_back("no validation images: validation is not measured");
  else if (!reports_topk())
    info.notes.push_back("top-" + std::to_string(config_.topk) + " accuracy is not reported: with " +
                         std::to_string(dataset_.class_names().size()) + " classes every image would count");
  if (const DatasetReport& data = dataset_.report();
      data.own_split && config_.data.validation_fraction != DataConfig{}.validation_fraction) {
    char fraction[32];
    std::snprintf(fraction, sizeof fraction, "%g", config_.data.validation_fraction);
    info.notes.push_back(std::string("the validation fraction (") + fraction +
                         ") is not used: the data has a validation split of its own (" + data.validation + ")");
  }
  if (const int64_t all = dataset_.report().validation_images_before_limit; all > validation_data_.size())
    info.notes.push_back("validated on " + counted(validation_data_.size()) + " of " + counted(all) +
                         " images, the same ones every epoch (the setting of validation images; 0: all)");
  if (plan_.deferred)
    info.notes.push_back(
        "no step waits for the device: each step's numbers are read one step later, and a skipped "
        "step does not name the layers that overflowed (the host sync every-step does)");
  if (plan_.captured && backend_->device().is_cpu())
    info.notes.push_back("CUDA graphs on captures no step on a CPU: each is timed for the time breakdown, op by op");
  else if (plan_.captured)
    info.notes.push_back("each batch shape's step is captured as a CUDA graph after its first " +
                         std::to_string(MixedPrecisionStep::kEagerSteps) +
                         " steps and replayed (CUDA graphs off runs every step op by op); the steps sampled for "
                         "the time breakdown run op by op");
  if (!plan_.deferred && !backend_->device().is_cpu()) {
    const std::string why_every_step = step_.why_not_deferred();
    info.notes.push_back("every step waits once for the GPU: " +
                         (why_every_step.empty() ? std::string("the host sync is every-step") : why_every_step));
  }
  if (!checkpoint_folder_.unguarded().empty())
    info.notes.push_back("the checkpoint folder cannot be locked here (" + checkpoint_folder_.unguarded() +
                         "): a second run given the same folder would not be refused");
  report_(&TrainObserver::on_start, info);
}

// The epoch loop.

std::optional<RunEnd> Trainer::Run::epochs() {
  for (; at_.epoch <= config_.epochs; ++at_.epoch, at_ = EpochProgress{at_.epoch}) {
    allocator_for(backend_->device()).reset_peak();
    paused_in_epoch_ = 0;
    const EpochStart start{Clock::now(), MachineLoadMeter(backend_->device().str()), at_.next_step,
                           step_.replayed_steps()};
    if (std::optional<RunEnd> end = train_epoch(start)) return end;
    if (std::optional<RunEnd> end = end_epoch(start)) return end;
  }
  return std::nullopt;
}

// The epoch's steps from where it stands, then the result of the last one queued.
std::optional<RunEnd> Trainer::Run::train_epoch(const EpochStart& start) {
  train_data_.start_epoch(at_.epoch);
  for (int64_t skip = 0; skip < at_.next_step; ++skip) train_data_.next(batch_);  // resuming mid-epoch
  const double wait_before = at_.data_wait - train_data_.wait_seconds();
  DeviceBatch next;
  for (; at_.next_step < steps_per_epoch_; ++at_.next_step, ++global_step_) {
    const int64_t b = at_.next_step;
    if (std::optional<RunEnd> end = interruption(b, start)) return end;
    GradientProbe* const probe = probe_for(b);
    const bool timed = step_timer_.begin(b, steps_per_epoch_, probe != nullptr, train_data_.wait_seconds());
    step_.set_capture(plan_.captured && !timed);  // a timed step's ops are timed one by one
    const DeviceBatch current = next.images.defined() ? std::move(next) : fetch(b);
    if (!current.images.defined()) {
      step_timer_.discard();
      break;
    }
    next = b + 1 < steps_per_epoch_ ? fetch(b + 1) : DeviceBatch{};
    at_.data_wait = wait_before + train_data_.wait_seconds();
    if (any_rank(current.images.n() < 2)) {  // batch norm cannot train on a single sample
      step_timer_.discard();
      continue;
    }
    if (std::optional<RunEnd> end = take_step(b, current, probe)) return end;
  }
  return settle_pending();
}

// How the run ends before step b when it must (cancelled, stopped, too many images lost); waits while paused.
std::optional<RunEnd> Trainer::Run::interruption(int64_t b, const EpochStart& start) {
  if (trainer_.paused_) {
    const Clock::time_point paused = Clock::now();
    if (report_.observer) report_.observer->on_paused();
    trainer_.wait_while_paused();
    const double seconds = seconds_since(paused);
    paused_in_epoch_ += seconds;
    if (report_.observer) report_.observer->on_resumed(seconds);
  }
  std::optional<std::string> lost = lost_images_.too_many();
  if (communicator_) {  // a rank told to stop (a signal to one process) stops them all at the same step
    int64_t told[] = {trainer_.cancel_ ? 1 : 0, trainer_.stop_ ? 1 : 0, lost ? 1 : 0};
    communicator_->all_reduce_sum(told, 3);
    if (told[0] > 0) trainer_.cancel_ = true;
    if (told[1] > 0) trainer_.stop_ = true;
    if (told[2] > 0 && !lost) lost = "another process lost too many of its images";
  }
  if (trainer_.cancel_)
    return RunEnd{RunStatus::Cancelled,
                  "stopped by the user at once, its progress since its last checkpoint not saved"};
  if (trainer_.stop_) {
    if (std::optional<RunEnd> end = settle_pending()) return end;
    // Steps counted within the epoch, as the progress line counts them (a checkpoint's step counts from the start).
    return RunEnd{RunStatus::Cancelled, "stopped by the user at epoch " + std::to_string(at_.epoch) + " after " +
                                            std::to_string(b) + " of its " + std::to_string(steps_per_epoch_) +
                                            " steps" + save(so_far(start))};
  }
  if (lost) {
    if (std::optional<RunEnd> end = settle_pending()) return end;
    note_lost(at_.epoch);
    return RunEnd{RunStatus::Failed, *lost + save(so_far(start))};
  }
  return std::nullopt;
}

// The paper's histogram and the per-layer numerics on the last step of each epoch; the numerics also every
// numerics_every steps, through a probe without histograms so that they stay one step's. Probed steps do host work
// no other step does: they are left out of the time breakdown.
GradientProbe* Trainer::Run::probe_for(int64_t b) {
  const bool last_of_epoch = b == steps_per_epoch_ - 1;
  const bool numerics_due = config_.numerics_every > 0 && (global_step_ + 1) % config_.numerics_every == 0;
  return last_of_epoch ? &probe_ : numerics_due ? &numerics_probe_ : nullptr;
}

// The loader passes over a batch whose every image was lost: the epoch then ends a step early, and only then.
Trainer::Run::DeviceBatch Trainer::Run::fetch(int64_t b) {
  if (train_data_.next(batch_)) return DeviceBatch{backend_->upload(batch_.images), backend_->upload(batch_.labels)};
  AMPWB_CHECK(train_data_.stats().lost > 0, "the data loader ended early at epoch " << at_.epoch << ", step " << b);
  return DeviceBatch{};
}

// Step b queued (deferred, its result read one step later) or run, and the result the host has settled.
std::optional<RunEnd> Trainer::Run::take_step(int64_t b, const DeviceBatch& batch, GradientProbe* probe) {
  const Tensor& images = batch.images;
  const Tensor& labels = batch.labels;
  const auto compute_start = Clock::now();
  const Launched launched{at_.epoch, global_step_, b, lr_schedule_.at(global_step_), images.n(), probe};
  std::optional<StepResult> result;  // this step's, or with deferred steps the one before's
  Launched result_of = launched;
  if (plan_.deferred && !probe) {
    result = step_.run_deferred(images, labels, launched.lr);
    result_of = pending_;
    pending_ = launched;
  } else {
    if (std::optional<RunEnd> end = settle_pending()) return end;  // a probed step needs the host
    result = step_.run(images, labels, launched.lr, probe);
  }
  at_.compute += seconds_since(compute_start);
  step_timer_.end(train_data_.wait_seconds());
  if (result) return settle(result_of, *result);
  return std::nullopt;
}

// A step's result: reported, checked, added to the epoch's sums. Ends the run where it must stop.
std::optional<RunEnd> Trainer::Run::settle(const Launched& s, const StepResult& r) {
  report_(&TrainObserver::on_step, StepReport{s.epoch, s.global_step, r.loss, static_cast<float>(r.correct) / s.images,
                                              s.lr, r.loss_scale, r.skipped, r.grad_norm, wall_seconds()});
  // After its on_step: the store's resume logic keys a run's details on the steps it holds.
  if (r.skipped)
    report_(&TrainObserver::on_overflow, OverflowReport{s.epoch, s.global_step, r.loss_scale, r.overflow.layers,
                                                        r.overflow.nonfinite_values, r.overflow.finite_norm});
  if (s.probe) report_(&TrainObserver::on_layer_numerics, s.probe->layers().take(s.epoch, s.global_step, r.loss_scale));
  const std::string where = " at epoch " + std::to_string(s.epoch) + ", step " + std::to_string(s.b + 1) + " of " +
                            std::to_string(steps_per_epoch_);
  if (!std::isfinite(r.loss) && !scaler_.dynamic()) {
    // A static scale does not come down when gradients overflow: too large a one is the likelier cause.
    const bool static_scale = config_.precision.loss_scale.kind == LossScaleKind::Static;
    char scale[32];
    std::snprintf(scale, sizeof scale, "%g", scaler_.scale());
    return RunEnd{RunStatus::Failed,
                  "the loss became " + std::to_string(r.loss) + where + " in " + mode_name(config_.precision.mode) +
                      (static_scale ? std::string(" with a static loss scale of ") + scale +
                                          ", which does not come down when gradients overflow: the run cannot "
                                          "recover (a smaller static scale, dynamic loss scaling, or a lower "
                                          "learning rate)"
                                    : std::string(" without loss scaling: the run cannot recover (lower the "
                                                  "learning rate, or use dynamic loss scaling)"))};
  }
  if (scaler_.collapsed())
    return RunEnd{RunStatus::Failed, "the loss scale sits at its minimum (" +
                                         std::to_string(config_.precision.loss_scale.min_scale) +
                                         ") and gradients still overflow" + where};
  consecutive_skipped_ = r.skipped ? consecutive_skipped_ + 1 : 0;
  if (consecutive_skipped_ >= config_.max_consecutive_skipped)
    return RunEnd{RunStatus::Failed, std::to_string(consecutive_skipped_) +
                                         " steps in a row had inf/NaN gradients and were skipped" + where +
                                         "; the loss scale fell to " + std::to_string(scaler_.scale())};
  at_.skipped += r.skipped;
  if (std::isfinite(r.loss)) {
    at_.loss_sum += static_cast<double>(r.loss) * s.images;
    at_.correct += r.correct;
    at_.seen += s.images;
  }
  return std::nullopt;
}

std::optional<RunEnd> Trainer::Run::settle_pending() {
  if (std::optional<StepResult> r = step_.finish_deferred()) return settle(pending_, *r);
  return std::nullopt;
}

// The epoch's histograms, validation and reports, then its checkpoint; ends the run when it must stop here.
std::optional<RunEnd> Trainer::Run::end_epoch(const EpochStart& start) {
  const int epoch = at_.epoch;
  for (const GradientHistogram& h : probe_.take(epoch, scaler_.scale())) report_(&TrainObserver::on_histogram, h);
  if (any_rank(trainer_.cancel_))
    return RunEnd{RunStatus::Cancelled,
                  "stopped by the user at once, its progress since its last checkpoint not saved"};
  const double train_seconds = at_.seconds_before + epoch_seconds(start);
  const MachineLoad load = start.load.stop(siblings_cpu_share(start.load));
  if (reducer_) {  // every rank validates its shard on rank 0's model, the one checkpointed
    std::vector<Buffer*> buffers;
    model_.collect_buffers(buffers);
    reducer_->broadcast_buffers_from_rank0(buffers);
  }
  const auto validation_start = Clock::now();
  const Evaluation val = evaluate(
      model_, *backend_, validation_data_, config_.topk,
      [&](int64_t done) {
        report_(&TrainObserver::on_validation,
                ValidationProgress{epoch, done, validation_data_.size(), seconds_since(validation_start)});
      },
      communicator_);
  note_lost(epoch);
  const EpochReport er = epoch_report(val, train_seconds, start);
  if (!val.confusion.empty())
    report_(&TrainObserver::on_confusion,
            ConfusionMatrix{epoch, static_cast<int64_t>(dataset_.class_names().size()), val.confusion});
  trainer_.epochs_.push_back(er);
  if (EpochTimes times = step_timer_.take(epoch); times.steps > 0) {
    times.replayed = static_cast<double>(step_.replayed_steps() - start.replayed_before) /
                     static_cast<double>(std::max<int64_t>(1, steps_per_epoch_ - start.first_step));
    if (plan_.captured) times.why_not_captured = step_.why_not_captured();
    times.load = load;
    report_(&TrainObserver::on_epoch_times, times);
  }
  report_(&TrainObserver::on_epoch, er);
  const std::string resumable = save(EpochProgress{epoch + 1});  // resumes at the next epoch
  std::optional<std::string> lost = lost_images_.too_many();
  if (communicator_) {  // every rank ends here or none: a stop or a loss that reached one process during the epoch
    int64_t told[] = {trainer_.stop_ ? 1 : 0, lost ? 1 : 0};
    communicator_->all_reduce_sum(told, 2);
    if (told[0] > 0) trainer_.stop_ = true;
    if (told[1] > 0 && !lost) lost = "another process lost too many of its images";
  }
  if (lost) return RunEnd{RunStatus::Failed, *lost + resumable};
  if (trainer_.stop_ && epoch < config_.epochs)
    return RunEnd{RunStatus::Cancelled, "stopped by the user after epoch " + std::to_string(epoch) + resumable};
  return std::nullopt;
}

EpochReport Trainer::Run::epoch_report(const Evaluation& val, double train_seconds, const EpochStart& start) const {
  EpochReport er;
  er.epoch = at_.epoch;
  er.topk = reports_topk() ? config_.topk : 0;
  er.train_loss = at_.seen ? at_.loss_sum / at_.seen : 0;
  er.train_accuracy = at_.seen ? static_cast<double>(at_.correct) / at_.seen : 0;
  er.validation_loss = val.loss;
  er.validation_accuracy = val.accuracy;
  er.validation_topk = reports_topk() ? val.topk_accuracy : std::numeric_limits<double>::quiet_NaN();
  // Both over the whole epoch, a resumed one's earlier process included, as the sums of its steps are.
  er.seconds = at_.seconds_before + epoch_seconds(start);
  // The training loss and accuracy are this rank's shard's; the speed every rank's (their shards of a step differ by
  // one image at most).
  const int ranks = communicator_ ? communicator_->world_size() : 1;
  er.images_per_second = train_seconds > 0 ? static_cast<double>(at_.seen) * ranks / train_seconds : 0;
  er.data_wait_seconds = at_.data_wait;
  er.compute_seconds = at_.compute;
  er.skipped_steps = at_.skipped;
  er.loss_scale = scaler_.scale();
  er.peak_bytes = allocator_for(backend_->device()).stats().peak_live_bytes;
  return er;
}

double Trainer::Run::siblings_cpu_share(const MachineLoadMeter& meter) const {
  if (!communicator_) return 0;
  const int ranks = communicator_->world_size(), me = communicator_->rank();
  // Each rank's machine (by its host name), process and share; ranks that are threads of one process share its own.
  std::vector<int64_t> host(ranks, 0), pid(ranks, 0);
  std::vector<double> share(ranks, 0.0);
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  host[me] = static_cast<int64_t>(std::hash<std::string>{}(name) >> 1);
  pid[me] = ::getpid();
  share[me] = meter.own_share();
  communicator_->all_reduce_sum(host.data(), host.size());
  communicator_->all_reduce_sum(pid.data(), pid.size());
  communicator_->all_reduce_sum(share.data(), share.size());
  std::set<int64_t> counted{pid[me]};
  double siblings = 0;
  for (int r = 0; r < ranks; ++r)
    if (host[r] == host[me] && counted.insert(pid[r]).second) siblings += share[r];
  return siblings;
}

EpochProgress Trainer::Run::so_far(const EpochStart& start) const {
  EpochProgress now = at_;
  now.seconds_before += epoch_seconds(start);
  return now;
}

std::string Trainer::Run::save(const EpochProgress& progress) {
  if (config_.checkpoint_dir.empty() || !leader()) return std::string();
  Checkpoint checkpoint = make_checkpoint(*backend_, config_, progress, wall_seconds(), global_step_,
                                          consecutive_skipped_, model_, *optimizer_, scaler_);
  checkpoint.meta["dataset"] = dataset_.report().fingerprint;  // its usable files, their classes, sizes and times
  std::string failure;  // of the file alone: a device's or the allocator's error ends the run
  try {
    std::filesystem::create_directories(config_.checkpoint_dir);
    save_checkpoint(trainer_.checkpoint_path(), checkpoint);
  } catch (const Error& e) {
    failure = e.what();
  } catch (const std::filesystem::filesystem_error& e) {
    failure = e.what();
  }
  if (!failure.empty()) {
    // A full disk costs the run a way back in, not its results: it trains on, and the checkpoint written before
    // (replaced whole or not at all, or kept as PATH.prev) is still the one it resumes from.
    const std::string when = progress.next_step == 0 ? "after epoch " + std::to_string(progress.epoch - 1)
                                                     : "in epoch " + std::to_string(progress.epoch);
    std::error_code ec;
    const bool earlier = std::filesystem::exists(trainer_.checkpoint_path(), ec) ||
                         std::filesystem::exists(previous_checkpoint_path(trainer_.checkpoint_path()), ec);
    if (!checkpoint_failed_)
      report_(&TrainObserver::on_note, "a checkpoint could not be written " + when + " (" + failure +
                                           "): training went on, and " +
                                           (earlier ? "the run resumes from the checkpoint before it"
                                                    : "the run cannot be resumed until a later checkpoint is written"));
    checkpoint_failed_ = true;
    return earlier ? "; resumable from an earlier checkpoint, " + trainer_.checkpoint_path() : std::string();
  }
  report_(&TrainObserver::on_checkpoint, CheckpointInfo{progress.epoch, global_step_, trainer_.checkpoint_path()});
  return "; resumable from " + trainer_.checkpoint_path();
}

void Trainer::Run::note_lost(int epoch) {
  if (std::optional<std::string> note = lost_images_.note(epoch)) report_(&TrainObserver::on_note, *note);
}

// Finishing.

// The precision divergence, once, from the final weights and the last batch trained on (or the first of an epoch,
// when a resumed run had no step left to take). FP32 is its own reference; TF32 is the backend's math.
void Trainer::Run::finish() {
  if (!leader()) return;
  const Normalization n = train_data_.normalization();
  Preprocessing preprocessing{image_size_, 3, choice_name(config_.data.normalization), {}, {}, dataset_.class_names()};
  std::copy(std::begin(n.mean), std::end(n.mean), preprocessing.mean.begin());
  std::copy(std::begin(n.stddev), std::end(n.stddev), preprocessing.stddev.begin());
  report_(&TrainObserver::on_final_weights,
          model_weights_of(*backend_, model_, preprocessing,
                           {0, config_.name, mode_name(config_.precision.mode), config_.epochs, global_step_}));
  if (policy_.low() == DType::F32 || trainer_.cancel_) return;
  if (!batch_.images.defined() || batch_.images.n() < 2) {
    train_data_.start_epoch(config_.epochs);
    AMPWB_CHECK(train_data_.next(batch_), "the data loader has no batch for the precision divergence");
  }
  if (batch_.images.n() < 2) return;
  backend_->set_enabled(false);  // two extra steps, in no epoch's time breakdown
  PrecisionDivergence divergence = measure_divergence(*backend_, model_, policy_, batch_.images, batch_.labels,
                                                      {scaler_.scale(), config_.label_smoothing});
  divergence.epoch = config_.epochs;
  divergence.step = global_step_;
  report_(&TrainObserver::on_divergence, divergence);
}

EpochReport train(const TrainConfig& config, TrainObserver* observer) {
  Trainer trainer(config, observer);
  const RunEnd end = trainer.run();
  if (end.status != RunStatus::Finished) throw Error(end.reason);
  AMPWB_CHECK(!trainer.epochs().empty(), "the run finished without an epoch");
  return trainer.epochs().back();
}

}  // namespace ampwb
