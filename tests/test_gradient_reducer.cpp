// The gradient reducer's communication thread on one process (train/gradient_reducer.h): a bucket's all-reduce
// starts while backward goes on, and a failed collective reaches the trainer's thread as its Error, the thread ending
// cleanly. A communicator of our own stands in for MPI (tests/test_dist_gradients.cpp runs real ranks).
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "core/rng.h"
#include "dist/single_process_communicator.h"
#include "models/resnet.h"
#include "train/gradient_reducer.h"

namespace ampwb {
namespace {

// Two ranks' worth of sums from one process (each value doubled, so the mean is the value again), that can hold
// its calls until released, or fail one.
class ScriptedCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 2; }
  int local_rank() const override { return 0; }
  void all_reduce_sum(float* data, size_t count) override {
    arrive();
    for (size_t i = 0; i < count; ++i) data[i] *= 2;
  }
  void all_reduce_sum(double*, size_t) override {}
  void all_reduce_sum(int64_t*, size_t) override {}
  void all_reduce_sum(uint16_t*, size_t, Float16Format) override { arrive(); }
  void broadcast(void*, size_t, int) override {}
  void barrier() override {}
  std::string describe() const override { return "scripted"; }

  void hold() {
    std::lock_guard lock(mutex_);
    held_ = true;
  }
  void release() {
    std::lock_guard lock(mutex_);
    held_ = false;
    changed_.notify_all();
  }
  void wait_for_calls(int calls) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return calls_ >= calls; });
  }
  void fail_call(int call) {
    std::lock_guard lock(mutex_);
    fail_call_ = call;
  }
  int calls() {
    std::lock_guard lock(mutex_);
    return calls_;
  }

 private:
  void arrive() {
    std::unique_lock lock(mutex_);
    ++calls_;
    changed_.notify_all();
    changed_.wait(lock, [&] { return !held_; });
    if (calls_ == fail_call_) throw Error("rank 1 of 2 did not answer MPI_Iallreduce");
  }
  std::mutex mutex_;
  std::condition_variable changed_;
  bool held_ = false;
  int calls_ = 0, fail_call_ = -1;
};

// A ResNet-20 at 8 px with gradients from one backward, the values known.
struct Model {
  CpuBackend backend{{1}};
  Rng rng{7};
  ResNet net{backend, ResNetConfig{20, 3, 3, 8, Stem::Auto}, rng};
  std::vector<std::vector<float>> grads;

  Model() {
    for (Parameter* p : net.parameters()) {
      p->grad = Tensor::empty(p->value.shape(), DType::F32);
      std::vector<float> values(static_cast<size_t>(p->grad.numel()));
      for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(rng.uniform()) - 0.5f;
      std::copy(values.begin(), values.end(), p->grad.data_as<float>());
      grads.push_back(values);
    }
  }
};

// Small buckets, so that the model's parameters fill many.
constexpr size_t kSmallBuckets = 16 << 10;

TEST(GradientReducer, ABucketsAllReduceStartsBeforeBackwardEnds) {
  Model model;
  ScriptedCommunicator communicator;
  // 1 KiB: the head's 195 values fill the first bucket alone.
  GradientReducer reducer(communicator, model.net.parameters(), GradientAllReduce::F32, 1024);
  ASSERT_GT(reducer.buckets(), 2u);
  communicator.hold();
  reducer.begin();
  // The head (fc) is the last parameter: the first bucket holds it and goes as soon as backward leaves it.
  std::vector<Layer*> head;
  model.net.visit([&](Layer& layer) {
    std::vector<Parameter*> params;
    layer.collect_parameters(params);
    if (params.size() == 2 && params[0]->name.rfind("fc", 0) == 0) head.push_back(&layer);
  });
  ASSERT_EQ(head.size(), 1u);
  reducer.gradients_final(*head[0]);
  if (reducer.buckets_launched() != 1u) {  // not waiting below for a call that will not come
    communicator.release();
    FAIL() << reducer.buckets_launched() << " buckets launched when backward has left the head";
  }
  communicator.wait_for_calls(1);  // the communication thread called it while this thread holds the rest
  communicator.release();
  reducer.finish();
  EXPECT_EQ(communicator.calls(), static_cast<int>(reducer.buckets()));
  const std::vector<Parameter*> params = model.net.parameters();
  for (size_t p = 0; p < params.size(); ++p)
    for (size_t i = 0; i < model.grads[p].size(); ++i)
      ASSERT_EQ(params[p]->grad.data_as<float>()[i], model.grads[p][i]) << params[p]->name;  // 2x / 2 ranks
}

TEST(GradientReducer, ACollectivesErrorReachesTheTrainersThread) {
  Model model;
  ScriptedCommunicator communicator;
  {
    GradientReducer reducer(communicator, model.net.parameters(), GradientAllReduce::F32, kSmallBuckets);
    communicator.fail_call(2);
    reducer.begin();
    try {
      reducer.finish();
      ADD_FAILURE() << "finish() returned after a failed all-reduce";
    } catch (const Error& e) {
      EXPECT_STREQ(e.what(), "rank 1 of 2 did not answer MPI_Iallreduce");
    }
    EXPECT_EQ(communicator.calls(), 2) << "the buckets after the failed one are dropped";
    // The reducer is usable again (as for a run that handles the error), and its thread ends at destruction.
    communicator.fail_call(-1);
    reducer.average_gradients();
    EXPECT_EQ(communicator.calls(), 2 + static_cast<int>(reducer.buckets()));
  }
}

TEST(GradientReducer, AStepThatThrowsLeavesNoBucketInFlight) {
  Model model;
  ScriptedCommunicator communicator;
  GradientReducer reducer(communicator, model.net.parameters(), GradientAllReduce::F32, kSmallBuckets);
  communicator.hold();
  reducer.begin();
  reducer.gradients_final(model.net);  // the whole model at once
  EXPECT_EQ(reducer.buckets_launched(), reducer.buckets());
  communicator.wait_for_calls(1);
  communicator.release();
  reducer.abandon();  // backward threw: every bucket handed over is done when this returns
  EXPECT_EQ(communicator.calls(), static_cast<int>(reducer.buckets()));
}

// ResNet-20's 1.1 MB of gradients are two buckets, not one that could only go at backward's end: the first, the
// last layers', at most 1 MiB (DistributedDataParallel's first bucket).
TEST(GradientReducer, ASmallModelsGradientsStillStartEarly) {
  Model model;
  SingleProcessCommunicator one;
  GradientReducer reducer(one, model.net.parameters());
  EXPECT_EQ(reducer.buckets(), 2u);
  std::vector<Parameter*> head;
  model.net.visit([&](Layer& layer) {
    std::vector<Parameter*> params;
    layer.collect_parameters(params);
    if (!params.empty() && params[0]->name.rfind("fc", 0) == 0 && params.size() == 2) head = params;
  });
  ASSERT_EQ(head.size(), 2u);
  reducer.begin();
  int64_t floats = 0;
  const std::vector<Parameter*> params = model.net.parameters();
  for (auto it = params.rbegin(); it != params.rend() && reducer.buckets_launched() == 0; ++it) {
    floats += it[0]->value.numel();
    // Backward leaves the layers last first; a layer whose parameters complete the first bucket launches it.
    struct One : Layer {
      Parameter* p;
      One(Backend& b, Parameter* q) : Layer(b), p(q) {}
      Tensor forward(const Tensor& x, Mode) override { return x; }
      Tensor backward(const Tensor& dy) override { return dy; }
      void collect_parameters(std::vector<Parameter*>& out) override { out.push_back(p); }
    } layer(model.backend, *it);
    reducer.gradients_final(layer);
  }
  reducer.finish();
  EXPECT_LE(floats * 4, int64_t{1} << 20) << "the first bucket's bytes";
  EXPECT_GT(floats * 4, int64_t{1} << 19);
}

TEST(GradientReducer, OneProcessLeavesTheGradientsAsTheyAre) {
  Model model;
  SingleProcessCommunicator one;
  for (GradientAllReduce precision : {GradientAllReduce::F32, GradientAllReduce::BF16}) {
    GradientReducer reducer(one, model.net.parameters(), precision);
    reducer.average_gradients();
  }
  // BF16's rounding is the one change: every value within 2^-8 of its own.
  const std::vector<Parameter*> params = model.net.parameters();
  for (size_t p = 0; p < params.size(); ++p)
    for (size_t i = 0; i < model.grads[p].size(); ++i)
      ASSERT_NEAR(params[p]->grad.data_as<float>()[i], model.grads[p][i], std::abs(model.grads[p][i]) * 0x1p-8f);
}

}  // namespace
}  // namespace ampwb
