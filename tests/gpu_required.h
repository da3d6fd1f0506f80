// A GPU verification must not pass by skipping. Under AMPWB_GPU_REQUIRED=1 (the GPU bundle's default, docs/gpu.md) a
// CUDA test (its name says cuda) that skips fails its program (tests/test_main.cpp), unless its reason begins with
// kDoesNotApply: the backend declares the op, dtype or format unsupported on this device, or the test is about a
// machine without a GPU. No GPU, a build without cudnn-frontend or NCCL, and the like fail there.
#pragma once

namespace ampwb::test {

inline constexpr const char* kDoesNotApply = "does not apply here: ";

}  // namespace ampwb::test
