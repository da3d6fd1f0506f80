// Choosing and making a backend: the devices this machine has, the options a backend is made with (the CPU's
// choices among its kernels: ConvAlgorithm, CpuBf16), and make_backend().
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "core/choices.h"
#include "core/device_choice.h"

namespace ampwb {

class Backend;

// How the CPU computes FP32 3x3 convolutions of 64 to 256 channels (stride 1): oneDNN's direct algorithm, or
// Winograd's F(2x2,3x3) (backend/cpu/winograd.h, 2.25x fewer multiply-adds). Auto takes Winograd where it was
// measured faster, CPUs without AVX-512 (1.4-2.2x per ResNet-18 convolution on Zen 1), and the direct algorithm
// elsewhere. Measured times both on each pass and shape's first call and keeps Winograd where it was at least
// kWinogradMargin faster: per machine and shape, at the cost that two runs may not choose alike (their curves then
// differ in rounding), so it is asked for, not the default. Auto and Measured also compute native BF16 convolutions
// on AMX as one matrix product each (im2col, then oneDNN's matmul) where oneDNN's own are slower: those whose output
// is 4x4 pixels or fewer. Gemm computes every NHWC convolution that way (tests).
enum class ConvAlgorithm { Auto, Direct, Winograd, Measured, Gemm };
template <>
struct ChoiceTable<ConvAlgorithm> {
  static constexpr const char* what = "convolution algorithm";
  static constexpr std::array<Choice<ConvAlgorithm>, 5> rows = {{
      {ConvAlgorithm::Auto, "auto", "auto",
       "FP32 3x3 ones by Winograd F(2x2,3x3) without AVX-512, else direct; with AVX-512, the forward pass of those "
       "of 4x4 outputs or fewer as a matrix product and their weight gradient by the engine's own kernel (strided: "
       "a product), and more passes and sizes for native BF16, whose stem also runs its own kernel"},
      {ConvAlgorithm::Direct, "direct", "direct", "oneDNN's everywhere"},
      {ConvAlgorithm::Winograd, "winograd", "Winograd", "FP32 3x3 ones by Winograd F(2x2,3x3) on every CPU"},
      {ConvAlgorithm::Measured, "measured", "measured",
       "the faster of Winograd and direct for each pass and shape, timed on its first call; two runs may then "
       "choose differently"},
      {ConvAlgorithm::Gemm, "gemm", "matrix products",
       "every convolution as one matrix product (im2col, then oneDNN's matmul), for tests"},
  }};
};
inline constexpr double kWinogradMargin = 1.1;

// How the CPU computes BF16 where oneDNN has BF16 primitives that the cores run natively. Auto takes them where
// the cores' BF16 multiply-adds outpace their FP32 ones (AMX tiles; AVX512-BF16 on AMD Zen 5) and otherwise
// emulates BF16 in FP32 primitives (an Intel Xeon's AVX512-BF16 without AMX ran at half FP32's rate:
// backend/cpu/multiply_add_rate.h). AMPWB_CPU_BF16=native|emulated in the environment overrides Auto, for A/B runs.
// Native: oneDNN's BF16 primitives wherever the cores run them natively, else (plain AVX-512, AVX2) the emulation.
// Emulated: always FP32 primitives on BF16 values (tests, benchmarks).
enum class CpuBf16 { Auto, Native, Emulated };

struct BackendOptions {
  int threads = 0;               // CPU worker threads; 0 = all cores
  CpuBf16 bf16 = CpuBf16::Auto;  // CPU: oneDNN's native BF16 primitives or the engine's emulation
  bool tf32 = false;             // CUDA: FP32 convolutions and matrix products on TF32 tensor cores (the tf32 mode)
  ConvAlgorithm conv_algorithm = ConvAlgorithm::Auto;  // CPU: FP32 3x3 convolutions
  // CUDA: deterministic cuDNN convolutions only, so that a run repeats bit for bit (the CPU's always do, for one
  // thread count and convolution algorithm); off, as in PyTorch, the fastest engines whatever their order of sums.
  bool deterministic = false;
};

// Auto: a CUDA GPU when one is usable, else the CPU.
std::unique_ptr<Backend> make_backend(DeviceChoice device, const BackendOptions& options = {});

// The CUDA stream `backend` queues its ops on (a cudaStream_t), seen through a ProfiledBackend too: where NCCL's
// collectives of a run on several GPUs queue. Null for the CPU, or a backend wrapped otherwise.
void* cuda_stream_of(Backend& backend);

// A device this machine has, as lists show it (the GUI's devices, `ampwb help`, the About box); what it can run
// comes from make_backend(id)->capabilities().
struct DeviceInfo {
  DeviceChoice id;          // what make_backend takes: cpu, cuda:0
  std::string name;         // the CPU's model or the GPU's name
  std::string isa;          // the instruction set oneDNN uses, or the compute capability ("sm_90")
  size_t memory_bytes = 0;  // physical RAM for the CPU
  std::string description;  // the backend's own words (library versions), for tooltips
};
std::vector<DeviceInfo> list_devices();  // the CPU first, then every CUDA GPU that can train
// Why the list has no GPU: "this build has no CUDA backend", "none found (CUDA runtime 13.0)"; empty if it has one.
std::string gpu_absence_reason();

}  // namespace ampwb
