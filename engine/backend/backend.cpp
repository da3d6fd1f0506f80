// Op names and the backend factory.
#include "backend/backend.h"

#include <array>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#ifdef AMPWB_HAVE_CUDA
#include "backend/cuda/cuda_device.h"
#endif

namespace ampwb {

namespace {
constexpr std::array kOpNames = {"conv2d", "batchnorm", "relu", "maxpool", "global_avgpool", "linear", "add",
                                 "convert", "softmax_cross_entropy", "sgd_update", "adam_update",
                                 "scale_and_check"};
static_assert(kOpNames.size() == static_cast<size_t>(Op::Count), "one name per op");
}  // namespace

const char* op_name(Op op) { return kOpNames.at(static_cast<size_t>(op)); }

std::unique_ptr<Backend> make_backend(const std::string& device, const BackendOptions& options) {
  if (device == "cpu") return std::make_unique<CpuBackend>(options);
  if (device == "auto") {
#ifdef AMPWB_HAVE_CUDA
    if (cuda_device_count() > 0)
      throw Error("a CUDA GPU was found, but the CUDA training backend is not implemented yet; use --device cpu");
#endif
    return std::make_unique<CpuBackend>(options);
  }
  if (device.starts_with("cuda")) {
#ifdef AMPWB_HAVE_CUDA
    if (cuda_device_count() == 0) throw Error("--device " + device + ": no usable CUDA GPU on this machine");
    throw Error("--device " + device + ": the CUDA training backend is not implemented yet");
#else
    throw Error("--device " + device + ": this build has no CUDA support (nvcc was not found at configure time)");
#endif
  }
  throw Error("unknown device '" + device + "' (expected cpu, cuda, cuda:N or auto)");
}

}  // namespace ampwb
