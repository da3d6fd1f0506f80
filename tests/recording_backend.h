// A backend that captures work as a GPU graph does (Backend::capture), for tests without a GPU. While it records,
// every op is kept with its arguments instead of running: tensors by handle (the same storage, as a graph keeps its
// addresses), numbers by value (as a graph keeps its kernels' arguments); replay() runs the record again. What a
// graph cannot hold is refused as the CUDA backend refuses it: reads and copies to the host, uploads, host waits.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "forwarding_backend.h"

namespace ampwb::testing {

// Each op of backend_ops.def kept while a capture records (RecordingBackend), else run at once.
class RecordingOps : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
#define AMPWB_OP(name, time_class, params, args)     \
  void name params override {                        \
    run([=, this]() mutable { inner().name args; }); \
  }
#include "backend/backend_ops.def"

 protected:
  void run(std::function<void()> op) {
    if (recording_)
      recording_->push_back(std::move(op));
    else
      op();
  }
  void refuse(const char* what) const {
    if (recording_) throw Error(std::string("a captured step cannot hold ") + what);
  }

  std::vector<std::function<void()>>* recording_ = nullptr;
};

class RecordingBackend final : public RecordingOps {
 public:
  using RecordingOps::RecordingOps;
  int captures = 0;
  int64_t replays = 0;
  bool refuse_updates = false;  // a capture fails at the optimizer, after the forward and backward were recorded

  // Records queue() twice, as the CUDA backend does, and keeps the second record: the first is dropped.
  std::unique_ptr<CapturedWork> capture(const std::function<void()>& queue, std::string& why_not) override {
    auto ops = std::make_shared<std::vector<std::function<void()>>>();
    for (int recording = 0; recording < 2; ++recording) {
      ops->clear();
      recording_ = ops.get();
      try {
        queue();
      } catch (const Error& e) {
        recording_ = nullptr;
        why_not = e.what();
        return nullptr;
      }
    }
    recording_ = nullptr;
    ++captures;
    return std::make_unique<Replay>(std::move(ops), replays);
  }

  // The workspace is the op's output: a graph writes it where the capture allocated it, so the recording allocates
  // it now (running the op once on whatever x holds) and each replay copies the op's record into it.
  void maxpool_forward(const Tensor& x, Tensor& y, Tensor& workspace, PoolParams p) override {
    if (!recording_) return inner().maxpool_forward(x, y, workspace, p);
    Tensor scratch_y = Tensor::empty(y.shape(), y.dtype(), y.layout(), y.device());
    inner().maxpool_forward(x, scratch_y, workspace, p);
    run([=, this]() mutable {
      Tensor fresh;
      inner().maxpool_forward(x, y, fresh, p);
      inner().convert(fresh, workspace);
    });
  }
  void convert(const Tensor& src, Tensor& dst) override {
    if (src.device() != device() || dst.device() != device()) refuse("a copy between the host and the device");
    run([=, this]() mutable { inner().convert(src, dst); });
  }
  void sgd_update(const std::vector<ParamUpdate>& params, const SgdParams& p) override {
    if (refuse_updates) refuse("an update (refused by the test)");
    RecordingOps::sgd_update(params, p);
  }
  void adam_update(const std::vector<ParamUpdate>& params, const AdamParams& p) override {
    if (refuse_updates) refuse("an update (refused by the test)");
    RecordingOps::adam_update(params, p);
  }
  StepScalars read_scalars() override { return refuse("read_scalars"), inner().read_scalars(); }
  void post_scalars(const Tensor* state) override { refuse("post_scalars"), inner().post_scalars(state); }
  PostedScalars collect_scalars() override { return refuse("collect_scalars"), inner().collect_scalars(); }
  Tensor upload(const Tensor& host) override { return refuse("an upload"), inner().upload(host); }
  void synchronize() override { refuse("a wait for the device"), inner().synchronize(); }

 private:
  class Replay final : public CapturedWork {
   public:
    Replay(std::shared_ptr<std::vector<std::function<void()>>> ops, int64_t& replays)
        : ops_(std::move(ops)), replays_(replays) {}
    void replay() override {
      for (auto& op : *ops_) op();
      ++replays_;
    }

   private:
    std::shared_ptr<std::vector<std::function<void()>>> ops_;
    int64_t& replays_;
  };
};

}  // namespace ampwb::testing
