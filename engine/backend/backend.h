// The backend interface: every op the layers run, for one device. Tensors carry no backend state; a backend keeps
// its own (primitive caches, streams). A backend without native FP16 compute emulates it (FP16 values, FP32
// accumulation, results rounded to FP16). The ops themselves are listed once, in backend_ops.def.
// Adding an op touches exactly: engine/backend/backend_ops.def (its entry; a fused variant's default composition in
// backend.cpp), engine/reference/reference_ops.{h,cpp} (its float64 version, unless its op case computes one), each
// backend that implements it (engine/backend/cpu/, engine/backend/cuda/; a fused variant only where it is faster)
// and its op case (tests/op_cases.h, tests/op_tolerances.h, tests/test_backend_ops.cpp). A new kind of op for
// supports() adds an Op below and its name in backend.cpp. The profiler and the tests' decorators forward through the
// list; the test op_recipe.* (cmake/CheckOpRecipe.cmake) keeps this true.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/capabilities.h"
#include "backend/op_params.h"
#include "core/tensor.h"

namespace ampwb {

// The kinds of op, as supports() is asked about them (a kind may cover several ops of backend_ops.def).
enum class Op {
  Conv2d,
  BatchNorm,
  Relu,
  MaxPool,
  GlobalAvgPool,
  Linear,
  Add,
  AddRelu,
  Convert,
  ScaledCast,  // FP8's scaled cast
  SoftmaxCrossEntropy,
  SgdUpdate,
  AdamUpdate,
  ScaleCheck,
  LossScaleUpdate,  // unscale_and_check with the state, the optimizers' skip, update_loss_scale
  Count
};
const char* op_name(Op op);

// Work recorded once by Backend::capture and queued again, as it was recorded, by replay().
class CapturedWork {
 public:
  virtual ~CapturedWork() = default;
  virtual void replay() = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // ---- The ops (backend_ops.def): pure where every backend implements them, composed by default where fused ----
#define AMPWB_OP(name, time_class, params, args) virtual void name params = 0;
#define AMPWB_FUSED_OP(name, time_class, params, args) virtual void name params;
#include "backend/backend_ops.def"
  virtual void convert(const Tensor& src, Tensor& dst) = 0;  // any dtype, layout or device to another

  // ---- What the backend is -----------------------------------------------------------------------------------
  virtual Device device() const = 0;
  virtual std::string description() const = 0;  // "cpu (AMD EPYC, oneDNN 2.6.3, avx512_core_bf16, 2 threads)"
  virtual Capabilities capabilities() const = 0;
  // Whether op runs in dtype here. By default (backend.cpp): convert any, the loss, optimizers and loss scaling FP32,
  // every other op each floating dtype (emulated where the device lacks it).
  virtual bool supports(Op op, DType dtype) const;
  // The device memory free now, for a run's memory check (train/memory_estimate.h); 0 where the backend does not
  // know (the CPU: the host's limits are read there).
  virtual size_t free_memory_bytes() const { return 0; }
  // Seconds spent so far converting inside other ops (weights reordered into a primitive's layout, the FP32 copies
  // around an emulated op), so that a profile bills them as conversions, not as the op.
  virtual double conversion_seconds() const { return 0; }

  // ---- The host and the device: scalars, uploads, waits ------------------------------------------------------
  // What the last softmax_cross_entropy and scale_and_check left, in one small copy; waits for the device.
  virtual StepScalars read_scalars() = 0;
  // The same without waiting (a step that never waits for the host): post_scalars starts copying what
  // read_scalars() would return now, and the loss-scale state if given, to the host behind the work queued so far
  // (a GPU: into pinned memory); collect_scalars returns the oldest posting not yet collected, waiting only for the
  // work queued before it. Posted at the end of step t and collected after step t+1 is queued, the device never
  // idles. At most two postings wait uncollected.
  virtual void post_scalars(const Tensor* loss_scale_state) = 0;
  virtual PostedScalars collect_scalars() = 0;
  // host on the device without waiting for the copy (a GPU copies from pinned memory on its own stream, overlapping
  // the work queued before; the first op to read the result waits for it). By default a plain copy: on_device().
  virtual Tensor upload(const Tensor& host);
  // Host copies of tensors, the host waiting for the device once for them all where on_host() of each would wait
  // each time (a GPU: one wait for a step's many small statistics). A host tensor comes back as it is. By default
  // on_host() of each.
  virtual std::vector<Tensor> download(const std::vector<Tensor>& tensors);
  virtual void synchronize() {}  // waits until the device has done the work queued so far (timing)

  // ---- Timing marks and capture --------------------------------------------------------------------------------
  // Timing on the device's own clock, without waiting (a GPU's events): mark() records a point behind the work
  // queued so far; seconds_between() reads the time between two marks, waiting for the later one to be passed;
  // clear_marks() lets the marks be reused. By default the host's clock, right where ops return when done (the CPU).
  virtual int64_t mark();
  virtual double seconds_between(int64_t from, int64_t to);
  virtual void clear_marks() {}
  // Records the device work that queue() queues, without running it, for CapturedWork::replay() to queue again with
  // the same arguments and addresses (a GPU's graph: no host work and no launch gaps per op). The memory queue()
  // allocates is the recording's for as long as it lives (Allocator pools). The host's own state (the callers'
  // counters) moves on during the recording as if the work had run. queue() may be called more than once (the CUDA
  // backend records twice, the first time to plan the memory): each call must queue the same work from the same
  // host state. Null, with the reason in why_not, where the
  // backend has no such recording (by default: ops run when called) or queue() did what a recording cannot hold:
  // a copy from or to the host, an event the host waits for, cuDNN still choosing an algorithm.
  virtual std::unique_ptr<CapturedWork> capture(const std::function<void()>& queue, std::string& why_not);

 protected:
  // For maxpool_backward where dy or dx is in another layout than the forward's output (whose layout the workspace
  // carries): runs it in that layout, where the argmax record reads right, converting what differs. False (nothing
  // done) where both are in it already.
  bool maxpool_backward_in_forward_layout(const Tensor& dy, const Tensor& workspace, Tensor& dx, PoolParams p);
};

// t on the backend's device: t itself when it is there already, else a copy (convert() moves between devices).
Tensor on_device(Backend& backend, const Tensor& t);
// t on the host: t itself when it is there, else a copy made by the backend that holds it.
Tensor on_host(Backend& backend, const Tensor& t);

}  // namespace ampwb

// make_backend() and the device list, for the callers that include only this header (the facade, the trainer, the
// CLI); the interface above does not depend on them.
#include "backend/make_backend.h"  // IWYU pragma: export
