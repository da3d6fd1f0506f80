// What a run says while it validates and what its epochs' times mean: validation on a fixed subset of a large
// split (said in the run's notes), validation progress reported before each epoch's report, and a resumed epoch
// whose seconds and images/s cover the same steps as its sums; and the events as lines of JSON, replayed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>

#include "core/error.h"
#include "data/dataset.h"
#include "data/dataset_data.h"
#include "image_folder_util.h"
#include "train/event_lines.h"
#include "train/observer_list.h"
#include "train/trainer.h"

namespace ampwb {
namespace {
namespace fs = std::filesystem;

// Every event the tests look at, in the order the trainer reported them.
class ProgressRecorder : public TrainObserver {
 public:
  void on_start(const RunInfo& i) override { info = i; }
  void on_step(const StepReport& s) override {
    order.push_back('s');
    steps.push_back(s);
  }
  void on_validation(const ValidationProgress& v) override {
    order.push_back('v');
    validations.push_back(v);
  }
  void on_confusion(const ConfusionMatrix& c) override { confusions.push_back(c); }
  void on_epoch(const EpochReport& e) override {
    order.push_back('e');
    epochs.push_back(e);
  }
  RunInfo info;
  std::string order;
  std::vector<StepReport> steps;
  std::vector<ValidationProgress> validations;
  std::vector<ConfusionMatrix> confusions;
  std::vector<EpochReport> epochs;
};

TrainConfig small_run(const fs::path& data) {
  TrainConfig c;
  c.data_dir = data.string();
  c.depth = 20;
  c.epochs = 2;
  c.batch_size = 8;
  c.lr = 0.05f;
  c.threads = 2;
  c.data.validation_fraction = 0.5;
  return c;
}

TEST(ValidationSubset, TheSameImagesOfEveryClassEachTimeAndTheNotesSaySo) {
  const fs::path data = make_stripes_folder("val_subset", 20, 12);  // 20 of the 40 images held out
  const Dataset all = Dataset::open(data.string(), {0.5, 0, 0, "-"});
  const Dataset first = Dataset::open(data.string(), {0.5, 0, 0, "-", 6});
  const Dataset again = Dataset::open(data.string(), {0.5, 0, 0, "-", 6});
  ASSERT_EQ(all.validation_size(), 20);
  ASSERT_EQ(first.validation_size(), 6);
  EXPECT_EQ(first.report().validation_images, 6);
  EXPECT_EQ(first.report().validation_images_before_limit, 20);
  EXPECT_EQ(first.train_size(), all.train_size()) << "the training split is not touched";
  const auto& subset = first.data()->validation;
  const auto& whole = all.data()->validation;
  ASSERT_EQ(again.data()->validation.size(), subset.size());
  int per_class[2] = {0, 0};
  for (size_t i = 0; i < subset.size(); ++i) {
    EXPECT_EQ(subset[i].item, again.data()->validation[i].item) << "a different subset at " << i;
    EXPECT_NE(std::find_if(whole.begin(), whole.end(), [&](const auto& s) { return s.item == subset[i].item; }),
              whole.end());
    ++per_class[subset[i].label];
  }
  EXPECT_EQ(per_class[0], 3);  // round-robin over the classes
  EXPECT_EQ(per_class[1], 3);

  // A run validates on those, every epoch, and its notes say on how many of how many.
  TrainConfig c = small_run(data);
  c.data.max_validation_images = 6;
  ProgressRecorder rec;
  train(c, &rec);
  EXPECT_EQ(rec.info.validation_images, 6);
  const auto note = std::find_if(rec.info.notes.begin(), rec.info.notes.end(),
                                 [](const std::string& n) { return n.starts_with("validated on 6 of 20 images"); });
  EXPECT_NE(note, rec.info.notes.end()) << testing::PrintToString(rec.info.notes);
  ASSERT_EQ(rec.confusions.size(), 2u);
  for (const ConfusionMatrix& m : rec.confusions)
    EXPECT_EQ(std::accumulate(m.counts.begin(), m.counts.end(), int64_t{0}), 6) << "epoch " << m.epoch;

  // A split no larger than the limit is validated whole, without a note.
  c.data.max_validation_images = 20;
  ProgressRecorder whole_run;
  train(c, &whole_run);
  EXPECT_EQ(whole_run.info.validation_images, 20);
  for (const std::string& n : whole_run.info.notes) EXPECT_FALSE(n.starts_with("validated on")) << n;
  fs::remove_all(data);
}

TEST(ValidationSubset, DefaultsToALimitThatStoredConfigurationsDidNotHave) {
  const TrainConfig defaults;
  EXPECT_EQ(defaults.data.max_validation_images, kDefaultMaxValidationImages);
  EXPECT_GT(kDefaultMaxValidationImages, 0);
  // A configuration stored before the setting validated on every image, and reads so.
  nlohmann::json stored = defaults;
  stored["data"].erase("max_validation_images");
  EXPECT_EQ(stored.get<TrainConfig>().data.max_validation_images, 0);
  EXPECT_EQ(nlohmann::json({{"depth", 50}}).get<TrainConfig>().data.max_validation_images, 0);
  // One stored with it keeps its value.
  TrainConfig limited;
  limited.data.max_validation_images = 300;
  EXPECT_EQ(nlohmann::json(limited).get<TrainConfig>().data.max_validation_images, 300);
  limited.data_dir = "/data";
  limited.data.max_validation_images = -1;
  try {
    validate(limited);
    FAIL() << "a negative validation limit was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the validation images' limit must not be negative"), std::string::npos)
        << e.what();
  }
}

TEST(ValidationProgress, ReportedFromNoneToAllBeforeEachEpochsReport) {
  const fs::path data = make_stripes_folder("val_progress", 20, 12);
  TrainConfig c = small_run(data);
  c.max_steps_per_epoch = 2;
  c.data.max_validation_images = 0;
  ProgressRecorder rec;
  train(c, &rec);
  ASSERT_EQ(rec.epochs.size(), 2u);
  // Per epoch: its steps, then validation progress from 0 to all 20 images, batch by batch (8, 16, 20), then the
  // epoch's report.
  EXPECT_EQ(rec.order, "ssvvvvessvvvve");
  ASSERT_EQ(rec.validations.size(), 8u);
  const int64_t done[] = {0, 8, 16, 20};
  for (size_t i = 0; i < rec.validations.size(); ++i) {
    const ValidationProgress& v = rec.validations[i];
    EXPECT_EQ(v.epoch, static_cast<int>(i / 4) + 1);
    EXPECT_EQ(v.images, 20);
    EXPECT_EQ(v.images_done, done[i % 4]);
    if (i % 4) {
      EXPECT_GE(v.seconds, rec.validations[i - 1].seconds);
    }
  }
  fs::remove_all(data);
}

// A real run's events as `ampwb train --events-json` prints them, replayed into an observer: the same events in the
// same order, a step that overflowed (NaN and infinity, which JSON writes as null) included; other lines are ignored.
TEST(EventLines, ARunsEventsReplayAsTheyHappened) {
  const fs::path data = make_stripes_folder("event_lines", 20, 12);
  TrainConfig c = small_run(data);
  c.max_steps_per_epoch = 2;
  ProgressRecorder direct;
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  EventLineWriter writer(out, [] { return int64_t{42}; });
  ObserverList both({&direct, &writer});
  train(c, &both);
  StepReport overflowed = direct.steps.back();
  overflowed.loss = std::numeric_limits<float>::infinity();
  overflowed.grad_norm = std::numeric_limits<float>::quiet_NaN();
  overflowed.skipped = true;
  writer.on_step(overflowed);
  std::rewind(out);
  std::string text;
  for (int ch; (ch = std::fgetc(out)) != EOF;) text += static_cast<char>(ch);
  std::fclose(out);

  ProgressRecorder replayed;
  std::istringstream lines("not an event\n" + text);
  int64_t run_id = 0, pid = 0;
  for (std::string line; std::getline(lines, line);) {
    const EventLinesStart start = replay_event_line(line, replayed);
    if (start.run_id) run_id = start.run_id, pid = start.pid;
  }
  EXPECT_EQ(run_id, 42);
  EXPECT_EQ(pid, ::getpid());
  EXPECT_EQ(replayed.order, direct.order + "s");
  EXPECT_EQ(nlohmann::json(replayed.info), nlohmann::json(direct.info));
  ASSERT_EQ(replayed.steps.size(), direct.steps.size() + 1);
  for (size_t i = 0; i < direct.steps.size(); ++i)
    EXPECT_EQ(nlohmann::json(replayed.steps[i]), nlohmann::json(direct.steps[i])) << i;
  EXPECT_TRUE(std::isnan(replayed.steps.back().loss));  // null comes back as NaN: unknown, not a number
  EXPECT_TRUE(std::isnan(replayed.steps.back().grad_norm));
  EXPECT_TRUE(replayed.steps.back().skipped);
  ASSERT_EQ(replayed.epochs.size(), direct.epochs.size());
  for (size_t i = 0; i < direct.epochs.size(); ++i)
    EXPECT_EQ(nlohmann::json(replayed.epochs[i]).dump(), nlohmann::json(direct.epochs[i]).dump()) << i;  // NaN: null
  ASSERT_EQ(replayed.validations.size(), direct.validations.size());
  EXPECT_EQ(replayed.validations.back().images_done, direct.validations.back().images_done);
  EXPECT_THROW(replay_event_line(R"({"event":"step","loss":"high"})", replayed), Error);
  fs::remove_all(data);
}

// Stops the trainer from its own thread once a given global step has been reported.
class StopAfter : public ProgressRecorder {
 public:
  StopAfter(Trainer*& trainer, int64_t step) : trainer_(trainer), step_(step) {}
  void on_step(const StepReport& s) override {
    ProgressRecorder::on_step(s);
    if (s.step == step_) trainer_->stop();
  }
  void on_checkpoint(const CheckpointInfo& c) override { checkpoints.push_back(c); }
  std::vector<CheckpointInfo> checkpoints;

 private:
  Trainer*& trainer_;
  int64_t step_;
};

// The epoch a run was stopped in and resumed: its seconds and images/s span both processes, as its compute time
// and its images do, so that images/s times the training time is the epoch's images.
TEST(EpochTimes, AResumedEpochsSecondsAndImagesPerSecondCoverTheSameSteps) {
  const fs::path data = make_stripes_folder("resumed_times", 20, 12);  // 20 training images: 3 steps of 8, 8, 4
  const fs::path dir = fs::temp_directory_path() / ("ampwb_resumed_times_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  TrainConfig c = small_run(data);
  c.checkpoint_dir = dir.string();
  Trainer* current = nullptr;
  StopAfter first(current, 4);  // epoch 2's second step
  Trainer part1(c, &first);
  current = &part1;
  ASSERT_EQ(part1.run().status, RunStatus::Cancelled);
  ASSERT_FALSE(first.checkpoints.empty());
  c.resume_from = first.checkpoints.back().path;
  StopAfter second(current, -1);
  Trainer part2(c, &second);
  current = &part2;
  ASSERT_EQ(part2.run().status, RunStatus::Finished);
  ASSERT_EQ(second.epochs.size(), 1u);
  const EpochReport& resumed = second.epochs.front();
  EXPECT_EQ(resumed.epoch, 2);
  // The epoch's time holds its steps' time, the first process's steps included.
  EXPECT_GE(resumed.seconds, resumed.compute_seconds + resumed.data_wait_seconds);
  // images/s is the epoch's 20 images over its training time, which holds the steps' compute and lies within the
  // epoch's seconds.
  EXPECT_LE(resumed.images_per_second * resumed.compute_seconds, 20.0 * (1 + 1e-9));
  EXPECT_GE(resumed.images_per_second * resumed.seconds, 20.0 * (1 - 1e-9));
  fs::remove_all(dir);
  fs::remove_all(data);
}

}  // namespace
}  // namespace ampwb
