// The backend interface: every op the layers run, for one device. Tensors carry no backend state; a backend keeps
// its own (primitive caches, streams). A backend without native FP16 compute emulates it (FP16 values, FP32
// accumulation, results rounded to FP16). The ops themselves are listed once, in backend_ops.def.
// Adding an op touches exactly: engine/backend/backend_ops.def (its entry: parameters and time class; a fused
// variant's default composition in backend.cpp), engine/reference/reference_ops.{h,cpp} (float64), each backend that
// implements it (engine/backend/cpu/, engine/backend/cuda/; a fused variant only where it is faster) and the op cases
// (tests/op_cases.h, tests/test_backend_ops.cpp). A new kind of op for supports() adds an Op below and its name in
// backend.cpp. The profiler and the tests' decorators forward through the list.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace ampwb {

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
  SoftmaxCrossEntropy,
  SgdUpdate,
  AdamUpdate,
  ScaleCheck,
  LossScaleUpdate,  // unscale_and_check with the state, the optimizers' skip, update_loss_scale
  Count
};
const char* op_name(Op op);

struct ConvParams {
  int stride = 1, padding = 0;
};
struct PoolParams {
  int kernel = 3, stride = 2, padding = 1;
};
// What an optimizer's update changes from one step to the next, where the step runs (a backend tensor of
// kOptimizerStepBytes U8 holding this struct): given one, an update reads lr and Adam's step there, not from its
// parameters, so that a captured step (Backend::capture) replays with the values of each step, not of its capture.
struct OptimizerStep {
  float lr = 0;
  int32_t unused = 0;
  int64_t step = 0;  // AdamParams::step
};
inline constexpr int64_t kOptimizerStepBytes = sizeof(OptimizerStep);

struct SgdParams {
  float lr, momentum, weight_decay;
  bool nesterov, first_step;
  const Tensor* skip_if_found_inf = nullptr;  // a LossScaleState: its found_inf set, the update changes nothing
  const Tensor* step_values = nullptr;        // an OptimizerStep: lr from there
  bool check_gradients = false;               // also what scale_and_check(grads, 1) finds, in the same pass
};
// One parameter's tensors for an update: param FP32, the master weights; copy undefined, or param's FP16/BF16
// compute copy (same shape and layout), written from the updated param in the same pass, bit for bit as convert()
// would; grad FP32, or FP16/BF16 where Capabilities::updates_read_16bit_gradients (its values, widened as read);
// state1, state2: the optimizer's state (SGD: the momentum buffer, undefined without momentum; Adam: the first and
// second moments).
struct ParamUpdate {
  Tensor param, copy, grad, state1, state2;
};
struct AdamParams {
  float lr, beta1, beta2, eps, weight_decay;
  bool decoupled_weight_decay;
  // PyTorch's Adam counts only the steps it takes (1 on the first). With skip_if_found_inf the host cannot know
  // which were: step then counts the steps queued since the state was made, taken or not, plus those taken before,
  // and the update's count is step less the state's skipped_steps.
  int64_t step;
  const Tensor* skip_if_found_inf = nullptr;  // as SgdParams'
  const Tensor* step_values = nullptr;        // an OptimizerStep: lr and step from there
  bool check_gradients = false;               // as SgdParams'
};
// The few numbers the host needs from a training step, left on the device by the ops that make them and read back
// together (Backend::read_scalars), so a step waits for its device at most once.
struct StepScalars {
  double loss = 0;            // softmax_cross_entropy: the mean loss over the batch
  int64_t correct = 0;        // softmax_cross_entropy: samples whose label has the largest logit (ties count against)
  bool nonfinite = false;     // scale_and_check: an inf/NaN among its inputs
  double sum_of_squares = 0;  // scale_and_check: of the results
};

// The dynamic loss scaler's state where the step runs, so that skipping a step and updating the scale need no
// host round trip on a GPU (issue 18): PyTorch GradScaler's FP32 scale and int32 growth tracker, and the step's
// found-inf flag. A backend tensor of kLossScaleStateBytes U8 holding this struct (a copy to the host reads it).
struct LossScaleState {
  float scale = 65536.0f;
  int32_t growth_tracker = 0;
  float found_inf = 0.0f;     // 1: unscale_and_check saw an inf/NaN; an update given this state then skips
  int32_t skipped_steps = 0;  // counted by update_loss_scale: the steps found_inf skipped (Adam's count)
};
inline constexpr int64_t kLossScaleStateBytes = sizeof(LossScaleState);
struct LossScaleGrowth {  // GradScaler's defaults
  double growth_factor = 2.0, backoff_factor = 0.5;
  int32_t growth_interval = 2000;
};
// What a loss gradient is multiplied by (loss scaling): factor, times the scale of a LossScaleState where one is
// given, read where the state lives (no host round trip for a scale that changes on the device).
struct GradScale {
  GradScale(float f = 1.0f) : factor(f) {}                                 // NOLINT: a plain factor converts
  GradScale(const Tensor& loss_scale_state) : state(&loss_scale_state) {}  // NOLINT
  float factor = 1.0f;
  const Tensor* state = nullptr;
};
// A step's scalars on their way to the host (Backend::post_scalars): what read_scalars() would have returned then,
// and the loss-scale state as it was, where one was posted.
struct PostedScalars {
  StepScalars scalars;
  LossScaleState loss_scale;
  bool has_loss_scale = false;
};

// How a backend computes in one number format, asked once per backend: the trainer, `ampwb bench`, the CLI and
// the GUI read this rather than checking devices and instruction sets themselves.
struct ComputeSupport {
  bool available = false;    // training in this format is possible here
  bool native = false;       // the hardware computes in it (else emulated: its values, FP32 arithmetic)
  std::string how;           // in words; when unavailable, the reason
  double speed_vs_fp32 = 0;  // a training step's speed against FP32 on such hardware, measured; 0 if unknown
  std::string speed_source;  // where that figure was measured
};
struct Capabilities {
  Device device;            // whose capabilities these are
  std::string device_name;  // the CPU's model or the GPU's name
  std::string isa;          // the CPU instruction set oneDNN uses, or the GPU's compute capability ("sm_90")
  size_t memory_bytes = 0;  // device memory (the CPU's: physical RAM)
  ComputeSupport fp16, bf16, tf32;
  bool updates_read_16bit_gradients = false;  // sgd_update and adam_update take a 16-bit grad (ParamUpdate)
};

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
  virtual std::string description() const = 0;  // e.g. "cpu (oneDNN 2.6.3, avx512_core_bf16, 2 threads)"
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
  // counters) moves on during the recording as if the work had run. Null, with the reason in why_not, where the
  // backend has no such recording (by default: ops run when called) or queue() did what a recording cannot hold:
  // a copy from or to the host, an event the host waits for, cuDNN still choosing an algorithm.
  virtual std::unique_ptr<CapturedWork> capture(const std::function<void()>& queue, std::string& why_not);

 protected:
  // For maxpool_backward where dy or dx is in another layout than the forward's output (whose layout the workspace
  // carries): runs it in that layout, where the argmax record reads right, converting what differs. False (nothing
  // done) where both are in it already.
  bool maxpool_backward_in_forward_layout(const Tensor& dy, const Tensor& workspace, Tensor& dx, PoolParams p);
};

// How the CPU computes FP32 3x3 convolutions of 64 to 256 channels (stride 1): oneDNN's direct algorithm, or
// Winograd's F(2x2,3x3) (backend/cpu/winograd.h, 2.25x fewer multiply-adds). Auto takes Winograd where it was
// measured faster, CPUs without AVX-512 (1.4-2.2x per ResNet-18 convolution on Zen 1), and the direct algorithm
// elsewhere. Measured times both on each pass and shape's first call and keeps Winograd where it was at least
// kWinogradMargin faster: per machine and shape, at the cost that two runs may not choose alike (their curves then
// differ in rounding), so it is asked for, not the default. Auto and Measured also compute native BF16 convolutions
// on AMX as one matrix product each (im2col, then oneDNN's matmul) where oneDNN's own are slower: those whose output
// is 4x4 pixels or fewer. Gemm computes every NHWC convolution that way (tests).
enum class ConvAlgorithm { Auto, Direct, Winograd, Measured, Gemm };
inline constexpr double kWinogradMargin = 1.1;

// How the CPU computes BF16 where oneDNN has BF16 primitives that the cores run natively. Auto takes them where
// the cores' BF16 multiply-adds outpace their FP32 ones (AMX tiles; AVX512-BF16 on AMD Zen 5) and otherwise
// emulates BF16 in FP32 primitives (an Intel Xeon's AVX512-BF16 without AMX ran at half FP32's rate:
// backend/cpu/multiply_add_rate.h). AMPWB_CPU_BF16=native|emulated in the environment overrides Auto, for A/B runs.
// Emulated: always FP32 primitives on BF16 values (tests, benchmarks).
enum class CpuBf16 { Auto, Native, Emulated };

struct BackendOptions {
  int threads = 0;               // CPU worker threads; 0 = all cores
  CpuBf16 bf16 = CpuBf16::Auto;  // CPU: oneDNN's native BF16 primitives or the engine's emulation
  bool tf32 = false;             // CUDA: FP32 convolutions and matrix products on TF32 tensor cores (the tf32 mode)
  ConvAlgorithm conv_algorithm = ConvAlgorithm::Auto;  // CPU: FP32 3x3 convolutions
};

// t on the backend's device: t itself when it is there already, else a copy (convert() moves between devices).
Tensor on_device(Backend& backend, const Tensor& t);
// t on the host: t itself when it is there, else a copy made by the backend that holds it.
Tensor on_host(Backend& backend, const Tensor& t);

// "cpu", "cuda", "cuda:N", or "auto" (a CUDA GPU when one is usable, else the CPU).
std::unique_ptr<Backend> make_backend(const std::string& device, const BackendOptions& options = {});

// A device this machine has, as lists show it (the GUI's devices, `ampwb help`, the About box); what it can run
// comes from make_backend(id)->capabilities().
struct DeviceInfo {
  std::string id;           // what make_backend takes: "cpu", "cuda:0"
  std::string name;         // the CPU's model or the GPU's name
  std::string isa;          // the instruction set oneDNN uses, or the compute capability ("sm_90")
  size_t memory_bytes = 0;  // physical RAM for the CPU
  std::string description;  // the backend's own words (library versions), for tooltips
};
std::vector<DeviceInfo> list_devices();  // the CPU first, then every CUDA GPU that can train
// Why the list has no GPU: "this build has no CUDA backend", "none found (CUDA runtime 13.0)"; empty if it has one.
std::string gpu_absence_reason();

}  // namespace ampwb
