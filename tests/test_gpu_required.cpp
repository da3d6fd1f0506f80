// The fixtures of the gpu_required.* tests (tests/CMakeLists.txt), which run them with AMPWB_GPU_REQUIRED=1: a CUDA
// test that skips because it cannot run fails the program (tests/test_main.cpp); one whose skip does not apply here,
// and a test of anything else that skips, pass. Disabled: elsewhere they would only skip.
#include <gtest/gtest.h>

#include "gpu_required.h"

namespace ampwb {
namespace {

TEST(GpuRequired, DISABLED_CudaTestThatCannotRunHere) { GTEST_SKIP() << "no usable CUDA GPU on this machine"; }

TEST(GpuRequired, DISABLED_CudaTestThatDoesNotApplyHere) {
  GTEST_SKIP() << test::kDoesNotApply << "a GPU is present: the no-GPU behaviour cannot be observed here";
}

TEST(GpuRequired, DISABLED_OtherTestThatSkips) { GTEST_SKIP() << "no AVX-512 here"; }

}  // namespace
}  // namespace ampwb
