// A Backend that forwards every op (backend_ops.def) and service to another: the base of the tests' decorators
// (fault injection, recording), which override only what they change.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"

namespace ampwb::testing {

class ForwardingBackend : public Backend {
 public:
  explicit ForwardingBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}
  Backend& inner() { return *inner_; }

  Device device() const override { return inner_->device(); }
  std::string description() const override { return inner_->description(); }
  bool supports(Op op, DType dtype) const override { return inner_->supports(op, dtype); }
  Capabilities capabilities() const override { return inner_->capabilities(); }
  void synchronize() override { inner_->synchronize(); }
  double conversion_seconds() const override { return inner_->conversion_seconds(); }
  std::unique_ptr<CapturedWork> capture(const std::function<void()>& queue, std::string& why_not) override {
    return inner_->capture(queue, why_not);
  }
  int64_t mark() override { return inner_->mark(); }
  double seconds_between(int64_t from, int64_t to) override { return inner_->seconds_between(from, to); }
  void clear_marks() override { inner_->clear_marks(); }

#define AMPWB_OP(name, time_class, params, args) \
  void name params override { inner_->name args; }
#include "backend/backend_ops.def"
  void convert(const Tensor& src, Tensor& dst) override { inner_->convert(src, dst); }
  StepScalars read_scalars() override { return inner_->read_scalars(); }
  void post_scalars(const Tensor* loss_scale_state) override { inner_->post_scalars(loss_scale_state); }
  PostedScalars collect_scalars() override { return inner_->collect_scalars(); }
  Tensor upload(const Tensor& host) override { return inner_->upload(host); }

 private:
  std::unique_ptr<Backend> inner_;
};

}  // namespace ampwb::testing
