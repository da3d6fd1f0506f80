// The trainer: a ResNet on a dataset folder, epoch after epoch, evaluated every epoch. It runs on the calling
// thread (run) or on its own (start), reports through a TrainObserver, and obeys pause, resume, stop (after the
// current step) and cancel from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "backend/backend.h"
#include "data/loader.h"
#include "dist/communicator.h"
#include "models/resnet.h"
#include "nn/loss.h"
#include "optim/optimizer.h"
#include "train/config.h"
#include "train/events.h"
#include "train/memory_estimate.h"
#include "train/mixed_precision_step.h"
#include "train/precision_support.h"

namespace ampwb {

struct Evaluation {  // NaN for data without images: nothing was measured
  double loss = 0, accuracy = 0, topk_accuracy = 0;
  std::vector<int64_t> confusion;  // classes x classes, row: the true class (add_to_confusion)
};
// `progress`, when given, hears the images evaluated so far: 0 before the first batch, then after each. With a
// communicator, each rank evaluates its shard of `data` and the result is the whole split's, the same on every rank.
Evaluation evaluate(ResNet& model, Backend& backend, DataLoader& data, int topk,
                    const std::function<void(int64_t images_done)>& progress = {},
                    Communicator* communicator = nullptr);

class Trainer {
 public:
  Trainer(TrainConfig config, TrainObserver* observer);
  ~Trainer();  // cancels a run still going and waits for it

  RunEnd run();   // on the calling thread; returns how the run ended (also reported to the observer)
  void start();   // on a background thread
  RunEnd wait();  // for a started run

  void pause();
  void resume();
  void stop();    // ends after the current step, as cancelled ("stopped")
  void cancel();  // ends as soon as possible, within one step
  bool paused() const { return paused_; }

  const TrainConfig& config() const { return config_; }
  // Where checkpoints go: checkpoint_dir/checkpoint.ampwb (empty without a checkpoint_dir).
  std::string checkpoint_path() const;
  const std::vector<EpochReport>& epochs() const { return epochs_; }  // after the run

  // For tests: wraps the backend the run makes before anything uses it (fault injection, op counting). The run
  // times ops over the wrapped backend.
  using BackendDecorator = std::function<std::unique_ptr<Backend>(std::unique_ptr<Backend>)>;
  void decorate_backend(BackendDecorator decorator) { decorate_backend_ = std::move(decorator); }

  // Data-parallel training with the other ranks of `communicator`, started by `launcher` (nullptr or one rank: this
  // process alone). Every rank runs the same configuration; each trains on its shard of every epoch, the gradients
  // averaged (train/gradient_reducer.h) and validation summed over the ranks. Rank 0 alone reports to the observer
  // and writes checkpoints.
  void set_communicator(Communicator* communicator, Launcher launcher) {
    communicator_ = communicator;
    launcher_ = launcher;
  }

 private:
  class Run;  // one call of train(): its phases (set-up, resume, the epoch loop, finishing) and their shared state
  RunEnd train();
  // Refuses a precision mode the device cannot run and notes where it will be slow.
  ModeSupport check_precision(const Backend& backend) const;
  bool wait_while_paused();  // false when cancelled or stopped meanwhile
  // What an allocation failure's message says after "out of memory": the run's estimate, what is available now and
  // the largest batch size that fits (train/memory_estimate.h).
  std::string memory_advice_text() const;

  TrainConfig config_;
  TrainObserver* observer_;
  BackendDecorator decorate_backend_;
  Communicator* communicator_ = nullptr;
  Launcher launcher_ = Launcher::Single;
  std::vector<EpochReport> epochs_;
  std::optional<MemoryEstimateInput> memory_input_;  // set once the data has given the image size and classes
  Device memory_device_ = Device::cpu();
  size_t memory_available_ = 0;  // at the start: a GPU's free memory cannot be asked once its backend is gone
  std::thread thread_;
  RunEnd result_;
  std::mutex mutex_;
  std::condition_variable resumed_;
  std::atomic<bool> paused_{false}, stop_{false}, cancel_{false};
};

// Trains on the calling thread and returns the last epoch's report; throws ampwb::Error if the run failed.
EpochReport train(const TrainConfig& config, TrainObserver* observer = nullptr);

}  // namespace ampwb
