// The device collectives of a communicator that has none: refused, naming what the caller should have checked.
#include "dist/communicator.h"

#include "core/error.h"

namespace ampwb {
namespace {

[[noreturn]] void refuse(const Communicator& communicator, const char* what) {
  throw Error(std::string(what) + " needs a communicator over GPU memory (NCCL); " + communicator.describe() +
              " works on host memory only");
}

}  // namespace

void Communicator::set_device_stream(void*) { refuse(*this, "a device stream"); }
void Communicator::device_inputs_ready(size_t) { refuse(*this, "a device collective"); }
void Communicator::all_reduce_mean_on_device(const std::vector<DeviceFloats>&, size_t) {
  refuse(*this, "an all-reduce of device memory");
}
void Communicator::broadcast_on_device(void*, size_t, int) { refuse(*this, "a broadcast of device memory"); }

}  // namespace ampwb
