// CPU softmax cross-entropy, the SGD and Adam updates of FP32 master weights (with their 16-bit copies), and the loss
// scaler's scale-and-check: plain and OpenMP loops, results kept in host memory for read_scalars().
#include <algorithm>
#include <cmath>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_backend_impl.h"
#include "core/convert16.h"
#include "core/simd.h"

namespace ampwb {

using cpu_detail::check_same;

namespace {
LossScaleState& loss_scale_state(const Tensor& state) {
  AMPWB_CHECK(state.dtype() == DType::U8 && state.numel() == kLossScaleStateBytes,
              "a loss-scale state is " << kLossScaleStateBytes << " bytes (U8), not " << state.describe());
  return *static_cast<LossScaleState*>(const_cast<void*>(state.data()));
}
}  // namespace

void CpuBackend::softmax_cross_entropy(const Tensor& logits, const Tensor& labels, float label_smoothing,
                                       GradScale grad_scale, Tensor& dlogits) {
  AMPWB_CHECK(logits.rank() == 2 && logits.dtype() == DType::F32 && labels.dtype() == DType::I32 &&
                  labels.numel() == logits.dim(0),
              "softmax_cross_entropy: logits " << logits.describe() << " labels " << labels.describe());
  check_same(logits, dlogits, "logits and their gradient");
  const int64_t N = logits.dim(0), K = logits.dim(1);
  const float scale = grad_scale.factor * (grad_scale.state ? loss_scale_state(*grad_scale.state).scale : 1.0f);
  const float* z = logits.data_as<float>();
  const int32_t* y = labels.data_as<int32_t>();
  float* dz = dlogits.data_as<float>();
  const double off_target = label_smoothing / K, on_target = 1.0 - label_smoothing + off_target;
  double total = 0.0;
  int64_t correct = 0;
  for (int64_t n = 0; n < N; ++n) {
    AMPWB_CHECK(y[n] >= 0 && y[n] < K, "label " << y[n] << " outside [0, " << K << ")");
    const float* row = z + n * K;
    double max = row[0];
    bool top1 = true;  // the label's logit above every other; a NaN on either side is no correct answer
    for (int64_t k = 1; k < K; ++k) max = std::max(max, static_cast<double>(row[k]));
    for (int64_t k = 0; k < K; ++k) top1 = top1 && (k == y[n] || row[k] < row[y[n]]);
    correct += top1;
    double sum = 0.0;
    for (int64_t k = 0; k < K; ++k) sum += std::exp(row[k] - max);
    const double log_sum = std::log(sum) + max;
    for (int64_t k = 0; k < K; ++k) {
      const double target = k == y[n] ? on_target : off_target;
      total -= target * (row[k] - log_sum);
      dz[n * K + k] = static_cast<float>((std::exp(row[k] - log_sum) - target) / N) * scale;
    }
  }
  scalars_.loss = total / N;
  scalars_.correct = correct;
}

namespace {
// Threads share a tensor in whole blocks of kUpdateBlock elements (thread_range), so a check's sums add up in the
// same order in every pass. Each thread then works through its share a piece at a time: the piece's 16-bit gradient
// widened, checked, the update, its 16-bit copy rounded, all while the piece is in L1, so gradient, master, state
// and copy are one pass over memory. Small pieces keep those arrays' memory streams in flight together: pieces of
// 2048 ran the BF16 update about 1.2x slower than 256 (ampwb bench --profile; docs/benchmarks.md, "AVX512-BF16").
constexpr int64_t kUpdateBlock = 2048;
constexpr int64_t kUpdatePiece = 256;

// Checks the optional 16-bit compute copy against its master; returns its rounding (nullptr: no copy).
using RoundFn = void (*)(const float*, uint16_t*, int64_t, int);
RoundFn copy_rounding(const Tensor& param, const Tensor& copy) {
  if (!copy.defined()) return nullptr;
  AMPWB_CHECK(copy.shape() == param.shape() && copy.layout() == param.layout() && copy.device() == param.device() &&
                  is_16bit(copy.dtype()),
              "the compute copy " << copy.describe() << " does not fit its master " << param.describe());
  return copy.dtype() == DType::BF16 ? f32_to_bf16 : f32_to_f16;
}

bool found_inf(const Tensor* state) { return state && loss_scale_state(*state).found_inf != 0.0f; }

// The OptimizerStep an update was given, or its own lr and step.
OptimizerStep step_values(const Tensor* values, float lr, int64_t step) {
  if (!values) return {lr, 0, step};
  AMPWB_CHECK(values->dtype() == DType::U8 && values->numel() == kOptimizerStepBytes,
              "an optimizer's step values are " << kOptimizerStepBytes << " bytes (U8), not " << values->describe());
  return *static_cast<const OptimizerStep*>(values->data());
}

// f() compiled for any x86-64, and again for AVX2 and AVX-512 (wider vectors) where simd_level() allows: f is
// inlined into each. The loops below compute each element by the same expressions on every path, lane by lane,
// and fuse no multiply-add (this file is compiled with -ffp-contract=off), so every path gives the same bits.
template <class F>
[[gnu::target("avx2")]] void call_avx2(F& f) {
  f();
}
template <class F>
[[gnu::target("avx512f,avx512bw,avx512vl")]] void call_avx512(F& f) {
  f();
}
template <class F>
void call_vectorised(SimdLevel level, F&& f) {
  if (level == SimdLevel::Avx512) return call_avx512(f);
  if (level == SimdLevel::Avx2) return call_avx2(f);
  f();
}

// scale_and_check's sums: kLanes partial sums, element i of a thread's range into lane i % kLanes, so that the
// order of the additions, and so the bits, do not depend on the vector width.
constexpr int64_t kLanes = 16;
static_assert(kUpdateBlock % kLanes == 0 && kUpdatePiece % kLanes == 0,
              "a block's and a piece's first elements go into lane 0");
struct CheckSums {
  double lanes[kLanes] = {};
  int nonfinite = 0;
};

// p[i] *= factor over [begin, end) (with Scale false, for a factor of 1, only read), the results' squares summed.
template <bool Scale>
[[gnu::always_inline]] inline void check_range(float* p, int64_t begin, int64_t end, float factor, CheckSums& sums) {
  double lanes[kLanes];
  std::copy(sums.lanes, sums.lanes + kLanes, lanes);
  int nonfinite = 0;
  int64_t i = begin;
  for (; i + kLanes <= end; i += kLanes) {
#pragma omp simd reduction(| : nonfinite)
    for (int64_t l = 0; l < kLanes; ++l) {
      float v = p[i + l];
      nonfinite |= !std::isfinite(v);  // the input, as PyTorch's unscale_ checks it
      if (Scale) p[i + l] = v = v * factor;
      lanes[l] += static_cast<double>(v) * v;
    }
  }
  for (int64_t l = 0; i < end; ++i, ++l) {
    float v = p[i];
    nonfinite |= !std::isfinite(v);
    if (Scale) p[i] = v = v * factor;
    lanes[l] += static_cast<double>(v) * v;
  }
  std::copy(lanes, lanes + kLanes, sums.lanes);
  sums.nonfinite |= nonfinite;
}

// Thread k's share of a tensor of n elements: whole blocks, in order. The updates and scale_and_check both split
// tensors so, and a check made inside an update sums in scale_and_check's order: the same bits.
std::pair<int64_t, int64_t> thread_range(int64_t n, int threads, int k) {
  const int64_t blocks = (n + kUpdateBlock - 1) / kUpdateBlock;
  const int64_t per_thread = (blocks + threads - 1) / threads * kUpdateBlock;
  return {std::min(n, k * per_thread), std::min(n, (k + 1) * per_thread)};
}

// An update's gradient: FP32, or 16-bit (Capabilities::updates_read_16bit_gradients) to widen block by block.
void check_gradient(const ParamUpdate& u, const char* what) {
  AMPWB_CHECK(u.grad.shape() == u.param.shape() && u.grad.layout() == u.param.layout() &&
                  (u.grad.dtype() == DType::F32 || is_16bit(u.grad.dtype())),
              what << ": " << u.param.describe() << " and " << u.grad.describe() << " differ");
}

// One tensor's update as the optimizers give it: its master, the optional 16-bit copy and its rounding, its gradient,
// the optimizer's state (nullptr where undefined).
struct Updated {
  float* w;
  uint16_t* copy;
  RoundFn round;
  const Tensor* grad;
  float *state1, *state2;
};

// Runs update(j, begin, end, g) over thread k's share of each tensor j in turn, piece by piece, g the piece's
// gradients (g[0] is element begin's), each piece followed by its copy's rounding (the same kernels convert() runs,
// so the copy is bit for bit what convert() would write). A 16-bit gradient is widened a piece at a time (exactly:
// every 16-bit value is an FP32 value), so it costs no pass of its own. With sums (one per thread), each piece's
// gradients are first checked as scale_and_check(g, 1) checks them, while they come into the cache. All tensors in
// one parallel region, as the CUDA backend updates them in one launch: one fork and join an update, not one a tensor.
template <class Update>
void update_in_pieces(const std::vector<Updated>& tensors, int threads, CheckSums* sums, Update&& update) {
  const SimdLevel level = simd_level();
#pragma omp parallel for num_threads(threads) schedule(static, 1)
  for (int k = 0; k < threads; ++k) {
    alignas(64) float widened[kUpdatePiece];
    for (size_t j = 0; j < tensors.size(); ++j) {
      const Updated& t = tensors[j];
      const bool wide = t.grad->dtype() == DType::F32;
      const auto [first, last] = thread_range(t.grad->numel(), threads, k);
      for (int64_t begin = first; begin < last; begin += kUpdatePiece) {
        const int64_t end = std::min(last, begin + kUpdatePiece);
        const float* g = wide ? t.grad->data_as<float>() + begin : widened;
        if (!wide) widen_16bit(t.grad->dtype(), t.grad->data_as<uint16_t>() + begin, widened, end - begin, 1);
        call_vectorised(level, [&] {
          if (sums) check_range<false>(const_cast<float*>(g), 0, end - begin, 1.0f, sums[k]);  // reads only
          update(j, begin, end, g);
        });
        if (t.round) t.round(t.w + begin, t.copy + begin, end - begin, 1);
      }
    }
  }
}

// The tensors of an update, checked.
std::vector<Updated> updated_tensors(const std::vector<ParamUpdate>& params, const char* what) {
  std::vector<Updated> tensors;
  for (const ParamUpdate& u : params) {
    check_gradient(u, what);
    const RoundFn round = copy_rounding(u.param, u.copy);
    auto state = [](const Tensor& t) { return t.defined() ? t.data_as<float>() : nullptr; };
    tensors.push_back({u.param.data_as<float>(), round ? u.copy.data_as<uint16_t>() : nullptr, round, &u.grad,
                       state(u.state1), state(u.state2)});
  }
  return tensors;
}

// The threads' sums, added in thread order, as read_scalars() returns them.
void store_check(const std::vector<CheckSums>& sums, StepScalars& scalars) {
  scalars.nonfinite = false;
  scalars.sum_of_squares = 0;
  for (const CheckSums& s : sums) {
    for (double lane : s.lanes) scalars.sum_of_squares += lane;
    scalars.nonfinite = scalars.nonfinite || s.nonfinite;
  }
}
}  // namespace

void CpuBackend::sgd_update(const std::vector<ParamUpdate>& params, const SgdParams& p) {
  const std::vector<Updated> tensors = updated_tensors(params, "SGD parameter and gradient");
  AMPWB_CHECK(!p.check_gradients || !p.skip_if_found_inf, "SGD: a check inside an update gated by one");
  if (found_inf(p.skip_if_found_inf)) return;  // the loss scaler skips this step
  const float lr = step_values(p.step_values, p.lr, 0).lr;
  for (const Updated& t : tensors)
    AMPWB_CHECK(p.momentum == 0.0f || t.state1, "SGD with momentum: a parameter without its momentum buffer");
  std::vector<CheckSums> sums(p.check_gradients ? threads_ : 0);
  update_in_pieces(tensors, threads_, sums.empty() ? nullptr : sums.data(),
                   [&](size_t j, int64_t begin, int64_t end, const float* g) {
                     // Copies in registers: stores through w and buf could alias p's floats and keep the loops
                     // from vectorising.
                     const float rate = lr, decay = p.weight_decay, momentum = p.momentum;
                     const bool first = p.first_step, nesterov = p.nesterov;
                     const int64_t n = end - begin;
                     float* w = tensors[j].w + begin;
                     if (momentum == 0.0f) {
#pragma omp simd
                       for (int64_t i = 0; i < n; ++i) w[i] -= rate * (g[i] + decay * w[i]);
                       return;
                     }
                     float* buf = tensors[j].state1 + begin;
#pragma omp simd
                     for (int64_t i = 0; i < n; ++i) {
                       const float d = g[i] + decay * w[i];
                       const float b = first ? d : momentum * buf[i] + d;  // PyTorch: no dampening, buffer = d
                       buf[i] = b;
                       w[i] -= rate * (nesterov ? d + momentum * b : b);
                     }
                   });
  if (p.check_gradients) store_check(sums, scalars_);
}

void CpuBackend::adam_update(const std::vector<ParamUpdate>& params, const AdamParams& p) {
  const std::vector<Updated> tensors = updated_tensors(params, "Adam parameter and gradient");
  AMPWB_CHECK(!p.check_gradients || !p.skip_if_found_inf, "Adam: a check inside an update gated by one");
  if (found_inf(p.skip_if_found_inf)) return;  // the loss scaler skips this step
  const OptimizerStep values = step_values(p.step_values, p.lr, p.step);
  const double t = static_cast<double>(
      p.skip_if_found_inf ? values.step - loss_scale_state(*p.skip_if_found_inf).skipped_steps : values.step);
  const float step_size = static_cast<float>(values.lr / (1.0 - std::pow(p.beta1, t)));
  const float bias2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(p.beta2, t)));
  const float decay = p.decoupled_weight_decay ? 1.0f - values.lr * p.weight_decay : 1.0f;
  const float l2 = p.decoupled_weight_decay ? 0.0f : p.weight_decay;
  std::vector<CheckSums> sums(p.check_gradients ? threads_ : 0);
  for (const Updated& t : tensors) AMPWB_CHECK(t.state1 && t.state2, "Adam: a parameter without its moments");
  update_in_pieces(tensors, threads_, sums.empty() ? nullptr : sums.data(),
                   [&](size_t j, int64_t begin, int64_t end, const float* g) {
                     const float beta1 = p.beta1, beta2 = p.beta2, eps = p.eps, shrink = decay, l2_decay = l2,
                                 size = step_size, bias = bias2_sqrt;  // in registers, as in SGD's
                     const int64_t n = end - begin;
                     float *w = tensors[j].w + begin, *m1 = tensors[j].state1 + begin, *m2 = tensors[j].state2 + begin;
#pragma omp simd
                     for (int64_t i = 0; i < n; ++i) {
                       const float gi = g[i] + l2_decay * w[i];
                       m1[i] = beta1 * m1[i] + (1 - beta1) * gi;
                       m2[i] = beta2 * m2[i] + (1 - beta2) * gi * gi;
                       w[i] = w[i] * shrink - size * m1[i] / (std::sqrt(m2[i]) / bias + eps);
                     }
                   });
  if (p.check_gradients) store_check(sums, scalars_);
}

void CpuBackend::scale_and_check(const std::vector<Tensor*>& tensors, float factor) {
  const SimdLevel level = simd_level();
  std::vector<CheckSums> sums(threads_);
  for (Tensor* t : tensors) {
    AMPWB_CHECK(t->dtype() == DType::F32, "scale_and_check expects FP32 tensors, got " << t->describe());
    float* p = t->data_as<float>();
    const int64_t n = t->numel();
#pragma omp parallel for num_threads(threads_) schedule(static, 1)
    for (int k = 0; k < threads_; ++k) {
      const std::pair<int64_t, int64_t> range = thread_range(n, threads_, k);
      const int64_t begin = range.first, end = range.second;  // not a structured binding: the lambdas capture them
      // Factor 1 (fp32, amp-bf16: no loss scale) leaves the tensor as it is: read only, half the memory traffic.
      if (factor == 1.0f)
        call_vectorised(level, [&] { check_range<false>(p, begin, end, factor, sums[k]); });
      else
        call_vectorised(level, [&] { check_range<true>(p, begin, end, factor, sums[k]); });
    }
  }
  store_check(sums, scalars_);
}

void CpuBackend::unscale_and_check(const std::vector<Tensor*>& grads, Tensor& state) {
  LossScaleState& s = loss_scale_state(state);
  scale_and_check(grads, static_cast<float>(1.0 / static_cast<double>(s.scale)));  // as PyTorch: in double, then float
  s.found_inf = scalars_.nonfinite ? 1.0f : 0.0f;
}

void CpuBackend::update_loss_scale(Tensor& state, const LossScaleGrowth& growth) {
  LossScaleState& s = loss_scale_state(state);
  if (s.found_inf != 0.0f) {
    s.scale = static_cast<float>(s.scale * growth.backoff_factor);  // the product in double, stored as FP32
    s.growth_tracker = 0;
    ++s.skipped_steps;
  } else if (s.growth_tracker + 1 == growth.growth_interval) {
    const float grown = static_cast<float>(s.scale * growth.growth_factor);
    if (std::isfinite(grown)) s.scale = grown;
    s.growth_tracker = 0;
  } else {
    ++s.growth_tracker;
  }
  s.found_inf = 0.0f;
}

void CpuBackend::post_scalars(const Tensor* loss_scale_state_tensor) {
  AMPWB_CHECK(posted_.size() < 2, "post_scalars: two postings wait uncollected already");
  PostedScalars p{scalars_, {}, loss_scale_state_tensor != nullptr};
  if (p.has_loss_scale) p.loss_scale = loss_scale_state(*loss_scale_state_tensor);
  posted_.push_back(p);
}

PostedScalars CpuBackend::collect_scalars() {
  AMPWB_CHECK(!posted_.empty(), "collect_scalars: nothing was posted");
  const PostedScalars p = posted_.front();
  posted_.pop_front();
  return p;
}

}  // namespace ampwb
