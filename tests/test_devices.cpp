// Device selection: the CPU always works; CUDA requests without a usable GPU fail with a clear message, and GPU
// queries skip cleanly on machines without one.
#include <gtest/gtest.h>

#include "backend/backend.h"
#ifdef AMPWB_HAVE_CUDA
#include "backend/cuda/cuda_device.h"
#endif

namespace ampwb {
namespace {

TEST(Devices, CpuAndAutoWithoutGpu) {
  EXPECT_EQ(make_backend(DeviceChoice::cpu(), {1})->device(), Device::cpu());
#ifdef AMPWB_HAVE_CUDA
  if (cuda_device_count() > 0) GTEST_SKIP() << "a GPU is present: 'auto' would choose it";
#endif
  EXPECT_EQ(make_backend(DeviceChoice::automatic(), {1})->device(), Device::cpu());
}

TEST(Devices, UnknownOrUnavailableDevicesAreRefusedByName) {
  try {
    make_backend(parse_device("tpu"));
    FAIL() << "tpu accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown device 'tpu'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(make_backend(DeviceChoice::cuda(0)), Error);  // no GPU here, no CUDA build, or no CUDA backend yet
}

#ifdef AMPWB_HAVE_CUDA
TEST(Cuda, DeviceQuery) {
  const auto devices = cuda_devices();
  if (devices.empty()) GTEST_SKIP() << "no usable CUDA GPU on this machine";
  for (const auto& d : devices) {
    EXPECT_FALSE(d.name.empty());
    EXPECT_GT(d.total_memory_bytes, 0u);
    EXPECT_GE(d.compute_capability_major, 5);
  }
}
#endif

}  // namespace
}  // namespace ampwb
