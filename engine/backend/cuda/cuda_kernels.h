// The CUDA backend's own kernels, as host-callable launchers with plain C++ signatures (no engine types), so that
// the .cu files stay small and the backend's host code compiles with g++. Every launcher queues work on `stream`
// and checks the launch (CUDA_CHECK_LAUNCH); none synchronizes.
//
// Dimension letters as in backend.h: N batch, C channels, H W height and width, P Q pooled height and width,
// K classes. A Dims4 is a tensor's logical (N,C,H,W) and whether it is stored NHWC; a tensor of another rank is
// passed as {numel, 1, 1, 1, false}.
// Arithmetic: 16-bit values are widened to FP32, computed in FP32, rounded to nearest even on store (as the CPU
// backend and tensor cores do). Reductions accumulate in FP32 within a thread (batch norm's partials also across
// a block's 8 thread rows, column sums across all rows) and mostly in FP64 across threads and blocks, in a fixed
// order: results are deterministic on one GPU (batch norm splits its rows by the GPU's multiprocessor count).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#ifdef __CUDACC__
#define AMPWB_HOST_DEVICE __host__ __device__
#else
#define AMPWB_HOST_DEVICE
#endif

namespace ampwb::cuda {

enum class KType : int { F32, F16, BF16, I32, U8, F8E4M3, F8E5M2 };  // the order of ampwb::DType

struct Dims4 {
  int64_t n = 1, c = 1, h = 1, w = 1;
  bool nhwc = false;
  AMPWB_HOST_DEVICE int64_t numel() const { return n * c * h * w; }
};

// ---- Conversions and copies -------------------------------------------------------------------------------------
// dst = src with another dtype and/or layout (same logical shape). Same dtype: an exact element permutation.
void convert(const void* src, KType src_type, Dims4 src_dims, void* dst, KType dst_type, Dims4 dst_dims,
             cudaStream_t stream);
// NHWC channel padding for tensor cores: dst (rows, padded_c) = src (rows, c) with zero channels appended;
// slice_channels is the inverse. element_size 2 or 4.
void pad_channels(const void* src, int64_t rows, int64_t c, void* dst, int64_t padded_c, size_t element_size,
                  cudaStream_t stream);
void slice_channels(const void* src, int64_t rows, int64_t padded_c, void* dst, int64_t c, size_t element_size,
                    cudaStream_t stream);

// ---- Elementwise ------------------------------------------------------------------------------------------------
// As the CPU backend: FP32 y = x > 0 ? x : 0; 16-bit types test the bits (sign clear, magnitude non-zero), exact.
void relu_forward(const void* x, void* y, KType type, int64_t n, cudaStream_t stream);
void relu_backward(const void* y, const void* dy, void* dx, KType type, int64_t n, cudaStream_t stream);
// dx = relu_backward(y, dy_a + dy_b), the sum rounded as add rounds it; all four in one storage order.
void relu_backward_of_sum(const void* y, const void* dy_a, const void* dy_b, void* dx, KType type, int64_t n,
                          cudaStream_t stream);
// y = a + b, same logical shape and dtype; layouts may differ. relu: y = relu(a + b), as add then relu_forward.
void add(const void* a, Dims4 a_dims, const void* b, Dims4 b_dims, void* y, Dims4 y_dims, KType type, bool relu,
         cudaStream_t stream);

// ---- Pooling ----------------------------------------------------------------------------------------------------
// Max pooling with padded positions ignored; argmax (one byte per output element, in y's storage order) holds
// the window position kh * kernel + kw of the first maximum. Backward gathers: each dx element sums the dy of the
// windows whose argmax it is (deterministic, no atomics). kernel * kernel must be at most 255.
void maxpool_forward(const void* x, Dims4 x_dims, void* y, Dims4 y_dims, uint8_t* argmax, KType type, int kernel,
                     int stride, int padding, cudaStream_t stream);
void maxpool_backward(const void* dy, Dims4 y_dims, const uint8_t* argmax, void* dx, Dims4 x_dims, KType type,
                      int kernel, int stride, int padding, cudaStream_t stream);
// y (N,C) row-major = mean over H, W of x; backward spreads dy / (H W).
void global_avgpool_forward(const void* x, Dims4 x_dims, void* y, KType type, cudaStream_t stream);
void global_avgpool_backward(const void* dy, void* dx, Dims4 x_dims, KType type, cudaStream_t stream);

// ---- Linear helpers ---------------------------------------------------------------------------------------------
// y (rows, cols) row-major: y[r][c] = b[c] (then the matrix product accumulates onto it).
void broadcast_rows(const void* b, KType b_type, void* y, KType y_type, int64_t rows, int64_t cols,
                    cudaStream_t stream);
// db[c] = sum over r of dy[r][c] (the bias gradient), FP32 accumulation.
void column_sum(const void* dy, KType dy_type, int64_t rows, int64_t cols, void* db, KType db_type,
                cudaStream_t stream);

// ---- Batch normalization (own kernels: FP32 statistics for FP32, FP16 and BF16 activations) --------------------
// The statistics without cancellation: in NHWC with whole 16-byte packs of channels one pass (Welford per thread,
// merged in FP64), otherwise two (the mean, then the mean squared deviation); then one pass to normalize.
// Scratch: batchnorm_scratch_floats() FP32 values of device memory; row_blocks from batchnorm_row_blocks().
int batchnorm_row_blocks(Dims4 dims, KType type, int sm_count);
int64_t batchnorm_scratch_floats(Dims4 dims, int row_blocks);
// mean and var (C) receive the batch mean and biased variance; running statistics as PyTorch (unbiased variance).
// residual: null, or a tensor of x's dims added to the result (a residual block's end); relu: the ReLU of the
// result. In the same pass, as the separate ops (add, relu_forward) would round them.
void batchnorm_forward_training(const void* x, const void* residual, void* y, KType type, Dims4 dims,
                                const float* gamma, const float* beta, float* mean, float* var, float* running_mean,
                                float* running_var, float momentum, float eps, bool relu, float* scratch,
                                int row_blocks, cudaStream_t stream);
void batchnorm_forward_inference(const void* x, void* y, KType type, Dims4 dims, const float* gamma, const float* beta,
                                 const float* running_mean, const float* running_var, float eps, float* scratch,
                                 int row_blocks, cudaStream_t stream);
// relu_beta: null, or the beta of a batch norm + ReLU: dy is read through the ReLU's mask, in both passes, the
// forward's output recomputed from x, gamma, relu_beta, mean and var, rounded as the forward rounded it.
void batchnorm_backward(const void* x, const void* dy, void* dx, KType type, Dims4 dims, const float* gamma,
                        const float* relu_beta, const float* mean, const float* var, float* dgamma, float* dbeta,
                        float eps, float* scratch, int row_blocks, cudaStream_t stream);

// ---- Loss ---------------------------------------------------------------------------------------------------------
// What softmax_cross_entropy leaves in device memory for the host to read after one copy.
struct LossResult {
  double loss = 0;    // the mean over the batch
  int correct = 0;    // rows whose label has the largest logit (ties count against)
  int bad_label = 0;  // 1 when a label was outside [0, K)
  int label = 0;      // one such label
};
// logits, dlogits (N,K) FP32; labels (N) I32; row_loss: N doubles of scratch.
// dlogits = grad_scale * (*scale_from, where not null: a loss scale in device memory) * d(mean loss)/d(logits).
void softmax_cross_entropy(const float* logits, const int32_t* labels, int64_t N, int64_t K, float label_smoothing,
                           float grad_scale, const float* scale_from, float* dlogits, double* row_loss,
                           LossResult* result, cudaStream_t stream);

// ---- Multi-tensor kernels: many tensors in one launch ------------------------------------------------------------
// Each tensor is a segment of kChunk-element chunks, numbered across the segments in order; a block takes chunks
// in turn and finds each one's segment in the device table by its first chunk.
inline constexpr int64_t kChunk = 4096;

// ---- Optimizers over FP32 master weights (the CPU backend's formulas), every parameter in one launch ---------------
// One parameter: its master w, gradient g and the optimizer's state (SGD: s1 the momentum buffer, or null without
// momentum; Adam: s1, s2 the first and second moments); copy null, or the 16-bit compute copy (copy_type, same
// layout), written in the same pass as convert() would write it.
struct UpdateSegment {
  float* w = nullptr;
  const float* g = nullptr;
  float* s1 = nullptr;
  float* s2 = nullptr;
  void* copy = nullptr;
  KType copy_type = KType::F32;
  int64_t n = 0;
  int64_t first_chunk = 0;  // chunks of the segments before this one
};
// found_inf: null, or the loss scaler's flag in device memory: when it is set the update changes nothing.
// values: null, or an optimizer's step values in device memory (laid out as ampwb::OptimizerStep): lr (and Adam's
// step) read there instead.
struct StepValues {
  float lr;
  int unused;
  int64_t step;
};
struct SgdHyper {
  float lr, momentum, weight_decay;
  bool nesterov, first_step;
};
// segments: a device table of segment_count; blocks: the grid (any count; each block strides over the chunks).
void sgd_update(const UpdateSegment* segments, int segment_count, int64_t total_chunks, int blocks, SgdHyper hyper,
                const float* found_inf, const StepValues* values, cudaStream_t stream);
// The bias corrections of step t (lr / (1 - beta1^t), sqrt(1 - beta2^t)) and AdamW's decay (1 - lr decoupled_wd;
// 0 for Adam, whose weight decay is l2) computed on the device, in double as the CPU backend does, from lr and
// t = step, or values' where given. state: null, or the loss scaler's: nothing changes where its found_inf is set,
// and t = step - its skipped_steps.
struct LossScaleDevice;
struct AdamHyper {
  float beta1, beta2, eps, decoupled_wd, l2;
};
void adam_update(const UpdateSegment* segments, int segment_count, int64_t total_chunks, int blocks, AdamHyper hyper,
                 float lr, int64_t step, const LossScaleDevice* state, const StepValues* values, cudaStream_t stream);

// ---- The fused unscale + inf/NaN check + sum of squares over many tensors: one launch ----------------------------
struct ScaleSegment {
  float* data = nullptr;
  int64_t n = 0;
  int64_t first_chunk = 0;  // chunks of the segments before this one
};
struct ScaleResult {
  double sum_of_squares = 0;
  int nonfinite = 0;         // set (atomicOr) by any block that saw inf or NaN
  unsigned blocks_done = 0;  // the last block to finish sums the per-block partials in a fixed order
};
// The loss scaler's state in device memory, laid out as ampwb::LossScaleState (backend.h).
struct LossScaleDevice {
  float scale;
  int growth_tracker;
  float found_inf;
  int skipped_steps;
};
// segments: device array; partials: `blocks` doubles; result must be zeroed (cudaMemsetAsync) before the launch.
// loss_scale: null, or a state whose 1 / scale replaces factor and whose found_inf receives the check's answer.
void scale_and_check(const ScaleSegment* segments, int segment_count, int64_t total_chunks, float factor,
                     double* partials, int blocks, ScaleResult* result, LossScaleDevice* loss_scale,
                     cudaStream_t stream);
// PyTorch's scale update on the device (one thread); clears found_inf.
void update_loss_scale(LossScaleDevice* state, double growth_factor, double backoff_factor, int growth_interval,
                       cudaStream_t stream);

// ---- FP8's scaled cast --------------------------------------------------------------------------------------------
// What the cast saw, in device memory, laid out as ampwb::Fp8CastStats (op_params.h).
struct Fp8StatsDevice {
  unsigned amax_bits;  // a non-negative float's bits: ordered as the floats are, so atomicMax finds the largest
  int unused;
  unsigned long long count, saturated, underflowed;
};
// A factor by value, times FP32 scalars read in device memory as a kernel runs (ampwb::Fp8Factor):
// ((value * *inverse0) * *inverse1) * *scale over the pointers given, its reciprocal where asked.
struct FactorDevice {
  float value = 1.0f;
  const float* inverse0 = nullptr;
  const float* inverse1 = nullptr;
  const float* scale = nullptr;
  bool reciprocal = false;
};
// y[i] = x[i] * factor, rounded to FP8 by cuda_fp8.h's __nv_cvt_float_to_fp8 with __NV_SATFINITE where fp8_format
// is 0 (E4M3) or 1 (E5M2), stored in y's type; -1: only the product rounded to y's type. stats: null, or zeroed here
// and filled by the launch.
void scaled_cast(const void* x, KType x_type, void* y, KType y_type, int64_t n, FactorDevice factor, int fp8_format,
                 Fp8StatsDevice* stats, cudaStream_t stream);
// The factor's value written to *out (for a convolution's epilogue, which reads one scalar).
void write_factor(FactorDevice factor, float* out, cudaStream_t stream);

// One FP8 tensor's delayed scaling (ampwb::Fp8ScalingUpdate): its state (F32, kFp8StateHistory + history_length
// values) takes the amax in stats as ampwb::update_device_state does, bit for bit.
// The state's layout, core/delayed_scaling.h's kFp8State* (scale-inverse, scale, scale used, oldest, history), by
// number here: that is no CUDA header (cuda_backend_ops.cpp checks they agree).
inline constexpr int kFp8StateSlots[5] = {0, 1, 2, 3, 4};
struct Fp8ScalingDevice {
  float* state;
  const Fp8StatsDevice* stats;
  int64_t count;  // the state's values
  float scaled_max;
  int max_rule;  // AmaxRule::Max, else the most recent
};
void update_fp8_scalings(const Fp8ScalingDevice* scalings, int count, cudaStream_t stream);

}  // namespace ampwb::cuda
