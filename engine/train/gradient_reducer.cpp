// Gradients averaged over the ranks (see the header).
#include "train/gradient_reducer.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace ampwb {
namespace {

// Collectives over host memory: a GPU's tensors need NCCL, which is not part of this communicator.
void require_host(const Tensor& t, const std::string& what) {
  AMPWB_CHECK(t.defined() && t.device().is_cpu(),
              "data-parallel training over MPI averages host tensors; " << what << " is on " << t.device().str());
}

}  // namespace

GradientReducer::GradientReducer(Communicator& communicator, std::vector<Parameter*> params, size_t bucket_bytes)
    : communicator_(communicator), params_(std::move(params)) {
  for (auto it = params_.rbegin(); it != params_.rend(); ++it) {
    const size_t floats = static_cast<size_t>((*it)->value.numel());
    if (buckets_.empty() || (buckets_.back().floats > 0 && (buckets_.back().floats + floats) * 4 > bucket_bytes))
      buckets_.emplace_back();
    buckets_.back().params.push_back(*it);
    buckets_.back().floats += floats;
  }
}

void GradientReducer::broadcast_from_rank0(const std::vector<Buffer*>& buffers) {
  for (Parameter* p : params_) {
    require_host(p->value, p->name);
    communicator_.broadcast(p->value.data(), p->value.nbytes(), 0);
    ++p->version;  // a low-precision compute copy follows the new values
  }
  for (Buffer* b : buffers) {
    require_host(b->value, b->name);
    communicator_.broadcast(b->value.data(), b->value.nbytes(), 0);
  }
}

void GradientReducer::average_gradients() {
  const float inverse_world = 1.0f / static_cast<float>(communicator_.world_size());
  for (const Bucket& bucket : buckets_) {
    flat_.resize(bucket.floats);
    size_t at = 0;
    for (const Parameter* p : bucket.params) {
      require_host(p->grad, p->name + "'s gradient");
      AMPWB_CHECK(p->grad.dtype() == DType::F32, p->name << "'s gradient is " << dtype_name(p->grad.dtype()));
      std::memcpy(flat_.data() + at, p->grad.data(), p->grad.nbytes());
      at += static_cast<size_t>(p->grad.numel());
    }
    communicator_.all_reduce_sum(flat_.data(), flat_.size());
    at = 0;
    for (Parameter* p : bucket.params) {
      float* grad = p->grad.data_as<float>();
      const size_t n = static_cast<size_t>(p->grad.numel());
      std::transform(flat_.data() + at, flat_.data() + at + n, grad, [&](float sum) { return sum * inverse_world; });
      at += n;
    }
  }
}

}  // namespace ampwb
