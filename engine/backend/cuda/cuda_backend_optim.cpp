// The CUDA backend's softmax cross-entropy, SGD and Adam updates of FP32 master weights (and their 16-bit copies), the
// loss scaler's fused scale-and-check and its device-resident state, read_scalars() (the one copy back to the host a
// waiting step makes) and post_scalars()/collect_scalars() (the same without waiting), and the timing marks.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_backend_impl.h"

namespace ampwb {

using cuda_detail::check_same;

namespace {
static_assert(sizeof(cuda::LossScaleDevice) == sizeof(LossScaleState), "one layout for the loss scaler's state");
static_assert(sizeof(cuda::StepValues) == sizeof(OptimizerStep) &&
                  offsetof(cuda::StepValues, step) == offsetof(OptimizerStep, step),
              "one layout for an optimizer's step values");

const cuda::StepValues* step_values(const Tensor* values) {
  if (!values) return nullptr;
  AMPWB_CHECK(values->dtype() == DType::U8 && values->numel() == kOptimizerStepBytes,
              "an optimizer's step values are " << kOptimizerStepBytes << " bytes (U8), not " << values->describe());
  return static_cast<const cuda::StepValues*>(values->data());
}

cuda::LossScaleDevice* loss_scale_state(const Tensor& state) {
  AMPWB_CHECK(state.dtype() == DType::U8 && state.numel() == kLossScaleStateBytes,
              "a loss-scale state is " << kLossScaleStateBytes << " bytes (U8), not " << state.describe());
  return static_cast<cuda::LossScaleDevice*>(const_cast<void*>(state.data()));
}
bool same_segment(const cuda::ScaleSegment& a, const cuda::ScaleSegment& b) {
  return a.data == b.data && a.n == b.n && a.first_chunk == b.first_chunk;
}
bool same_segment(const cuda::UpdateSegment& a, const cuda::UpdateSegment& b) {
  return a.w == b.w && a.g == b.g && a.s1 == b.s1 && a.s2 == b.s2 && a.copy == b.copy && a.copy_type == b.copy_type &&
         a.n == b.n && a.first_chunk == b.first_chunk;
}
int64_t chunks_of(int64_t n) { return (n + cuda::kChunk - 1) / cuda::kChunk; }
const float* found_inf_of(const Tensor* state) { return state ? &loss_scale_state(*state)->found_inf : nullptr; }

// The 16-bit compute copy an optimizer writes in its own pass: null when there is none.
void* compute_copy(const Tensor& param, Tensor& copy) {
  if (!copy.defined()) return nullptr;
  AMPWB_CHECK(copy.shape() == param.shape() && copy.layout() == param.layout() && copy.device() == param.device() &&
                  is_16bit(copy.dtype()),
              "the compute copy " << copy.describe() << " does not fit its master " << param.describe());
  return copy.data();
}
cuda::KType copy_type(const Tensor& copy) {
  return copy.defined() ? cuda_detail::ktype(copy.dtype()) : cuda::KType::F32;
}
}  // namespace

void CudaBackend::softmax_cross_entropy(const Tensor& logits, const Tensor& labels, float label_smoothing,
                                        GradScale grad_scale, Tensor& dlogits) {
  CUDA_OP_ENTRY(&logits, &labels, grad_scale.state ? grad_scale.state : &logits);
  Impl& m = *impl_;
  m.check_device(logits, "softmax_cross_entropy logits");
  m.check_device(labels, "softmax_cross_entropy labels");
  m.check_device(dlogits, "softmax_cross_entropy dlogits");
  AMPWB_CHECK(logits.rank() == 2 && logits.dtype() == DType::F32 && labels.dtype() == DType::I32 &&
                  labels.numel() == logits.dim(0),
              "softmax_cross_entropy: logits " << logits.describe() << " labels " << labels.describe());
  check_same(logits, dlogits, "logits and their gradient");
  if (grad_scale.state) m.check_device(*grad_scale.state, "softmax_cross_entropy's loss-scale state");
  const int64_t N = logits.dim(0), K = logits.dim(1);
  AMPWB_CHECK(N > 0 && K > 0, "softmax_cross_entropy of an empty batch: " << logits.describe());
  Tensor row_loss = m.bytes(static_cast<size_t>(N) * sizeof(double));  // one double per row
  cuda::softmax_cross_entropy(
      logits.data_as<float>(), labels.data_as<int32_t>(), N, K, label_smoothing, grad_scale.factor,
      grad_scale.state ? &loss_scale_state(*grad_scale.state)->scale : nullptr, dlogits.data_as<float>(),
      static_cast<double*>(row_loss.data()), m.device_loss(), m.stream);
  m.classes = K;  // for read_scalars()' message on a bad label
}

std::vector<cuda::UpdateSegment> CudaBackend::update_segments(const std::vector<ParamUpdate>& params, int states,
                                                              const char* optimizer, int64_t& chunks) {
  Impl& m = *impl_;
  std::vector<cuda::UpdateSegment> segments;
  chunks = 0;
  const std::string name(optimizer);
  for (const ParamUpdate& u : params) {
    m.ready({&u.param, &u.grad});
    m.check_device(u.param, (name + " parameter").c_str());
    m.check_device(u.grad, (name + " gradient").c_str());
    check_same(u.param, u.grad, (name + " parameter and gradient").c_str());
    AMPWB_CHECK(u.param.dtype() == DType::F32, optimizer << " updates FP32 master weights, got " << u.param.describe());
    const Tensor* state[] = {&u.state1, &u.state2};
    for (int i = 0; i < states; ++i) {
      m.ready({state[i]});
      m.check_device(*state[i], (name + " state").c_str());
      check_same(u.param, *state[i], (name + " parameter and state").c_str());
    }
    Tensor copy = u.copy;
    if (copy.defined()) m.ready({&copy});
    if (u.param.numel() == 0) continue;
    segments.push_back({u.param.data_as<float>(), u.grad.data_as<float>(),
                        states > 0 ? u.state1.data_as<float>() : nullptr,
                        states > 1 ? u.state2.data_as<float>() : nullptr, compute_copy(u.param, copy), copy_type(copy),
                        u.param.numel(), chunks});
    chunks += chunks_of(u.param.numel());
  }
  return segments;
}

// The check an update was asked to make: here its own pass before the update, as the step made it before the
// option (taking it into the update kernels is left undone: the GPU's deferred steps never ask for it).
void CudaBackend::check_before_update(const std::vector<ParamUpdate>& params) {
  std::vector<Tensor*> grads;
  for (const ParamUpdate& u : params) grads.push_back(const_cast<Tensor*>(&u.grad));
  scale_and_check(grads, 1.0f);
}

void CudaBackend::sgd_update(const std::vector<ParamUpdate>& params, const SgdParams& p) {
  if (p.check_gradients) check_before_update(params);
  const Tensor none;
  CUDA_OP_ENTRY(p.skip_if_found_inf ? p.skip_if_found_inf : &none, p.step_values ? p.step_values : &none);
  Impl& m = *impl_;
  if (p.step_values) m.check_device(*p.step_values, "SGD's step values");
  if (p.skip_if_found_inf) m.check_device(*p.skip_if_found_inf, "SGD's loss-scale state");
  int64_t chunks = 0;
  std::vector<cuda::UpdateSegment> segments = update_segments(params, p.momentum != 0.0f ? 1 : 0, "SGD", chunks);
  if (segments.empty()) return;
  const int count = static_cast<int>(segments.size());
  const cuda::UpdateSegment* table = m.device_table(m.update_table, std::move(segments), same_segment);
  cuda::sgd_update(table, count, chunks, m.multi_tensor_blocks(chunks),
                   {p.lr, p.momentum, p.weight_decay, p.nesterov, p.first_step}, found_inf_of(p.skip_if_found_inf),
                   step_values(p.step_values), m.stream);
}

void CudaBackend::adam_update(const std::vector<ParamUpdate>& params, const AdamParams& p) {
  if (p.check_gradients) check_before_update(params);
  const Tensor none;
  CUDA_OP_ENTRY(p.skip_if_found_inf ? p.skip_if_found_inf : &none, p.step_values ? p.step_values : &none);
  Impl& m = *impl_;
  if (p.skip_if_found_inf) m.check_device(*p.skip_if_found_inf, "Adam's loss-scale state");
  if (p.step_values) m.check_device(*p.step_values, "Adam's step values");
  int64_t chunks = 0;
  std::vector<cuda::UpdateSegment> segments = update_segments(params, 2, "Adam", chunks);
  if (segments.empty()) return;
  const int count = static_cast<int>(segments.size());
  const cuda::UpdateSegment* table = m.device_table(m.update_table, std::move(segments), same_segment);
  const cuda::AdamHyper hyper{p.beta1, p.beta2, p.eps, p.decoupled_weight_decay ? p.weight_decay : 0.0f,
                              p.decoupled_weight_decay ? 0.0f : p.weight_decay};
  cuda::adam_update(table, count, chunks, m.multi_tensor_blocks(chunks), hyper, p.lr, p.step,
                    p.skip_if_found_inf ? loss_scale_state(*p.skip_if_found_inf) : nullptr, step_values(p.step_values),
                    m.stream);
}

void CudaBackend::scale_and_check(const std::vector<Tensor*>& tensors, float factor) {
  scale_and_check(tensors, factor, nullptr);
}

void CudaBackend::unscale_and_check(const std::vector<Tensor*>& grads, Tensor& state) {
  CUDA_OP_ENTRY(&state);
  impl_->check_device(state, "loss-scale state");
  cuda::LossScaleDevice* s = loss_scale_state(state);
  CUDA_CHECK(cudaMemsetAsync(&s->found_inf, 0, sizeof(float), impl_->stream));  // no gradients: none found
  scale_and_check(grads, 1.0f, s);
}

void CudaBackend::update_loss_scale(Tensor& state, const LossScaleGrowth& growth) {
  CUDA_OP_ENTRY(&state);
  impl_->check_device(state, "loss-scale state");
  cuda::update_loss_scale(loss_scale_state(state), growth.growth_factor, growth.backoff_factor, growth.growth_interval,
                          impl_->stream);
}

void CudaBackend::scale_and_check(const std::vector<Tensor*>& tensors, float factor,
                                  cuda::LossScaleDevice* loss_scale) {
  cuda::DeviceScope device_scope(impl_->device.index);
  Impl& m = *impl_;
  std::vector<cuda::ScaleSegment> segments;
  int64_t chunks = 0;
  for (Tensor* t : tensors) {
    AMPWB_CHECK(t && t->defined(), "scale_and_check of an undefined tensor");
    m.ready({t});
    m.check_device(*t, "scale_and_check tensor");
    AMPWB_CHECK(t->dtype() == DType::F32, "scale_and_check expects FP32 tensors, got " << t->describe());
    if (t->numel() == 0) continue;
    segments.push_back({t->data_as<float>(), t->numel(), chunks});
    chunks += chunks_of(t->numel());
  }
  CUDA_CHECK(cudaMemsetAsync(m.device_scale(), 0, sizeof(cuda::ScaleResult), m.stream));
  if (segments.empty()) return;
  const int count = static_cast<int>(segments.size());
  const cuda::ScaleSegment* table = m.device_table(m.scale_table, std::move(segments), same_segment);
  const int blocks = m.multi_tensor_blocks(chunks);
  Tensor partials = m.bytes(static_cast<size_t>(blocks) * sizeof(double));
  cuda::scale_and_check(table, count, chunks, factor, static_cast<double*>(partials.data()), blocks, m.device_scale(),
                        loss_scale, m.stream);
}

StepScalars CudaBackend::read_scalars() {
  cuda::DeviceScope device_scope(impl_->device.index);
  Impl& m = *impl_;
  const Impl::Results& r = m.read_results();
  AMPWB_CHECK(!r.loss.bad_label, "label " << r.loss.label << " outside [0, " << m.classes << ")");
  return {r.loss.loss, r.loss.correct, r.scale.nonfinite != 0, r.scale.sum_of_squares};
}

void CudaBackend::post_scalars(const Tensor* loss_scale_state_tensor) {
  cuda::DeviceScope device_scope(impl_->device.index);
  Impl& m = *impl_;
  m.refuse_while_capturing("post_scalars (post after the replay)");
  AMPWB_CHECK(m.posted_count < 2, "post_scalars: two postings wait uncollected already");
  const int slot = (m.posted_first + m.posted_count) % 2;
  Impl::Posted& to = m.posted[slot];
  CUDA_CHECK(
      cudaMemcpyAsync(&to.results, m.device_results.data(), sizeof(Impl::Results), cudaMemcpyDeviceToHost, m.stream));
  m.posted_has_loss_scale[slot] = loss_scale_state_tensor != nullptr;
  if (loss_scale_state_tensor) {
    m.ready({loss_scale_state_tensor});
    m.check_device(*loss_scale_state_tensor, "post_scalars' loss-scale state");
    CUDA_CHECK(cudaMemcpyAsync(&to.loss_scale, loss_scale_state(*loss_scale_state_tensor),
                               sizeof(cuda::LossScaleDevice), cudaMemcpyDeviceToHost, m.stream));
  }
  CUDA_CHECK(cudaEventRecord(m.posted_done[slot], m.stream));
  ++m.posted_count;
}

PostedScalars CudaBackend::collect_scalars() {
  cuda::DeviceScope device_scope(impl_->device.index);
  Impl& m = *impl_;
  m.refuse_while_capturing("collect_scalars");
  AMPWB_CHECK(m.posted_count > 0, "collect_scalars: nothing was posted");
  const int slot = m.posted_first;
  CUDA_CHECK(cudaEventSynchronize(m.posted_done[slot]));  // the work queued before the posting, not after
  m.posted_first = 1 - m.posted_first;
  --m.posted_count;
  const Impl::Results& r = m.posted[slot].results;
  AMPWB_CHECK(!r.loss.bad_label, "label " << r.loss.label << " outside [0, " << m.classes << ")");
  PostedScalars p{{r.loss.loss, r.loss.correct, r.scale.nonfinite != 0, r.scale.sum_of_squares}, {}, false};
  if (m.posted_has_loss_scale[slot]) {
    const cuda::LossScaleDevice& s = m.posted[slot].loss_scale;
    p.loss_scale = {s.scale, s.growth_tracker, s.found_inf, s.skipped_steps};
    p.has_loss_scale = true;
  }
  return p;
}

int64_t CudaBackend::mark() {
  cuda::DeviceScope device_scope(impl_->device.index);
  Impl& m = *impl_;
  m.refuse_while_capturing("a timing mark (profiles time eager steps)");
  if (m.marks_used == m.marks.size()) {
    cudaEvent_t e = nullptr;
    CUDA_CHECK(cudaEventCreate(&e));
    m.marks.push_back(e);
  }
  CUDA_CHECK(cudaEventRecord(m.marks[m.marks_used], m.stream));
  return static_cast<int64_t>(m.marks_used++);
}

double CudaBackend::seconds_between(int64_t from, int64_t to) {
  cuda::DeviceScope device_scope(impl_->device.index);
  Impl& m = *impl_;
  AMPWB_CHECK(from >= 0 && to >= 0 && static_cast<size_t>(std::max(from, to)) < m.marks_used,
              "seconds_between: marks " << from << " and " << to << " were not made since clear_marks()");
  CUDA_CHECK(cudaEventSynchronize(m.marks[static_cast<size_t>(to)]));
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, m.marks[static_cast<size_t>(from)], m.marks[static_cast<size_t>(to)]));
  return ms * 1e-3;
}

void CudaBackend::clear_marks() { impl_->marks_used = 0; }

}  // namespace ampwb
