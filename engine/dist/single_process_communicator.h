// The communicator of a run on one process: the sums and broadcasts of one rank leave the data as it is.
#pragma once

#include "dist/communicator.h"

namespace ampwb {

class SingleProcessCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  int local_rank() const override { return 0; }

  void all_reduce_sum(float*, size_t) override {}
  void all_reduce_sum(double*, size_t) override {}
  void all_reduce_sum(int64_t*, size_t) override {}
  void all_reduce_sum(uint16_t*, size_t, Float16Format) override {}
  void broadcast(void* data, size_t bytes, int root) override;
  void barrier() override {}

  std::string describe() const override { return "single process"; }
};

}  // namespace ampwb
