// Data-parallel gradients, as PyTorch's DistributedDataParallel keeps them: every rank starts from rank 0's weights
// and buffers, and each step's weight gradients become their mean over the ranks before the loss scaler checks them,
// so an overflow on any rank is an overflow on every rank (an inf or NaN survives the sum) and every rank skips the
// same steps, backs its scale off alike and takes bit-identical updates.
#pragma once

#include <cstddef>
#include <vector>

#include "dist/communicator.h"
#include "nn/layer.h"

namespace ampwb {

class GradientReducer {
 public:
  static constexpr size_t kBucketBytes = size_t{25} << 20;  // DistributedDataParallel's default bucket_cap_mb

  // Buckets of about bucket_bytes in reverse order of `params` (the order backward produces the gradients), the
  // same on every rank since every rank builds the same model.
  GradientReducer(Communicator& communicator, std::vector<Parameter*> params, size_t bucket_bytes = kBucketBytes);

  // Rank 0's parameter values and buffers copied to every rank.
  void broadcast_from_rank0(const std::vector<Buffer*>& buffers);
  // Every gradient (FP32, on the host) becomes the mean over the ranks: summed in FP32, then times 1 / world size.
  void average_gradients();

  size_t buckets() const { return buckets_.size(); }

 private:
  struct Bucket {
    std::vector<Parameter*> params;
    size_t floats = 0;
  };
  Communicator& communicator_;
  std::vector<Parameter*> params_;
  std::vector<Bucket> buckets_;
  std::vector<float> flat_;  // one bucket's gradients side by side, reused
};

}  // namespace ampwb
