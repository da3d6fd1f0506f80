// The CPU backend's construction, its description and capabilities (which precisions run natively, which are
// emulated, and why) and the ops it supports; the ops themselves are in the other cpu_backend_*.cpp files.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_backend_impl.h"
#include "backend/cpu/multiply_add_rate.h"
#include "core/simd.h"

namespace ampwb {

using cpu_detail::isa_name;
using cpu_detail::runs_bf16_natively;

namespace {
// A 3x3 convolution from ResNet's second stage, batch 16: what oneDNN offers for BF16 training on this CPU. Asked
// once per process (every backend asks at construction; oneDNN's instruction set is fixed for the process).
const std::string& onednn_bf16_convolution() {
  static const std::string implementation = [] {
    const memory::dims x{16, 64, 28, 28}, w{64, 64, 3, 3}, unit{1, 1};
    try {
      auto d = dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                               memory::desc(x, DnnlType::bf16, Tag::nhwc),
                                               memory::desc(w, DnnlType::bf16, Tag::any),
                                               memory::desc(x, DnnlType::bf16, Tag::nhwc), unit, unit, unit);
      const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
      return std::string(dnnl::convolution_forward::primitive_desc(d, engine).impl_info_str());
    } catch (const dnnl::error&) {
      return std::string();
    }
  }();
  return implementation;
}

std::string cpu_model_name() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);)
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      const std::string name = line.substr(line.find(':') + 1);
      return name.substr(std::min(name.find_first_not_of(' '), name.size()));
    }
  return "unknown CPU";
}

// amp-bf16's training speed against fp32's on each CPU path, ResNet-18 at 64 px batch 32, 2 threads.
// Measured by bench/cpu_acceptance.py on a Zen 5, native BF16 without AMX (docs/benchmarks.md, "AVX512-BF16").
constexpr double kBf16SpeedAvx512Bf16 = 1.82;
const char* const kBf16SpeedAvx512Bf16Source =
    "bench/cpu_acceptance.py, ResNet-18 64 px batch 32 on an AMD EPYC Zen 5 (docs/benchmarks.md)";
// Measured by bench/bf16_paths.sh on an Intel Xeon with AMX (docs/benchmarks.md, "AMX").
constexpr double kBf16SpeedAmx = 1.93;
const char* const kBf16SpeedAmxSource =
    "bench/bf16_paths.sh, ResNet-18 64 px batch 32 on an Intel Xeon (family 6 model 207) with AMX "
    "(docs/benchmarks.md)";
// Native BF16 convolutions are taken where the cores' BF16 multiply-adds run at least this much faster than their
// FP32 ones: 2.0x on Zen 5, 0.49x on an Intel Xeon whose AMX a hypervisor hides (build/bench/ampwb_conv_dtypes;
// docs/benchmarks.md, "AVX512-BF16"); the emulation costs 2-8% of a step, so a clear gain pays.
constexpr double kNativeBf16MinRateRatio = 1.2;
// Measured by bench/bf16_paths.sh with oneDNN capped to AVX2 on a Zen 5 (docs/benchmarks.md, "BF16 on plain
// AVX-512, emulated on the Zen 5").
constexpr double kBf16SpeedEngineEmulated = 1.0;
const char* const kBf16SpeedSource =
    "bench/bf16_paths.sh, ResNet-18 64 px batch 32 on an AMD EPYC Zen 5 (docs/benchmarks.md)";
// Measured by bench/bf16_paths.sh on plain AVX-512 (docs/benchmarks.md, "Intel Xeon with its BF16 hidden").
constexpr double kBf16SpeedPlainAvx512 = 0.89;
const char* const kBf16SpeedPlainAvx512Source =
    "bench/bf16_paths.sh, ResNet-18 64 px batch 32 on an Intel Xeon (family 6 model 207) whose BF16 instructions "
    "a hypervisor hides (docs/benchmarks.md)";
// Measured by bench/bf16_paths.sh on an Intel Xeon without AMX (docs/benchmarks.md, "AVX512-BF16").
constexpr double kBf16SpeedEmulatedOverSlowBf16 = 0.92;
const char* const kBf16SpeedSlowBf16Source =
    "bench/bf16_paths.sh, ResNet-18 64 px batch 32 on an Intel Xeon (family 6 model 207) without AMX "
    "(docs/benchmarks.md)";

// BF16 multiply-adds against FP32 ones on one core (multiply_add_rate.h); 0 where the CPU has no AVX512-BF16.
double bf16_rate_ratio() {
  if (!cpu_has_avx512_bf16()) return 0;
  const MultiplyAddRates& rates = one_core_multiply_add_rates();
  return rates.fp32_gflops > 0 ? rates.bf16_gflops / rates.fp32_gflops : 0;
}

// Whether oneDNN's BF16 `implementation` beats the engine's emulation: AMX tiles always, AVX512-BF16 where its dot
// products outpace FP32 FMA.
bool native_bf16_pays(const std::string& implementation) {
  if (!runs_bf16_natively(implementation)) return false;
  return implementation.find("amx") != std::string::npos || bf16_rate_ratio() >= kNativeBf16MinRateRatio;
}
}  // namespace

CpuBackend::CpuBackend(const BackendOptions& options) : impl_(std::make_unique<Impl>()) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads_ = options.threads > 0 ? options.threads : cores;
#if defined(__SANITIZE_THREAD__)
  // libgomp is not instrumented: ThreadSanitizer cannot see its fork and join, and would report every parallel
  // loop as a race. Its builds run one OpenMP thread, so what it checks is the engine's own threads.
  threads_ = 1;
#endif
  impl_->threads = threads_;
  impl_->bf16_mode = options.bf16;
  if (options.bf16 == CpuBf16::Auto)
    if (const char* forced = std::getenv("AMPWB_CPU_BF16")) {
      const std::string s(forced);
      AMPWB_CHECK(s == "native" || s == "emulated", "AMPWB_CPU_BF16 is '" << s << "': native or emulated");
      impl_->bf16_mode = s == "native" ? CpuBf16::Native : CpuBf16::Emulated;
    }
  // Native asked where oneDNN runs no BF16 natively is emulation too: its convolutions would be refused
  // (require_native_bf16) and the rest taken half from oneDNN's own slow emulation.
  const std::string onednn = onednn_bf16_convolution();
  impl_->emulate_bf16 = impl_->bf16_mode == CpuBf16::Emulated || !runs_bf16_natively(onednn) ||
                        (impl_->bf16_mode == CpuBf16::Auto && !native_bf16_pays(onednn));
  winograd_ = options.conv_algorithm == ConvAlgorithm::Winograd ||
              (options.conv_algorithm == ConvAlgorithm::Auto && simd_level() < SimdLevel::Avx512);
  measure_winograd_ = options.conv_algorithm == ConvAlgorithm::Measured;
  winograd_where_emulation_pays_ = options.conv_algorithm == ConvAlgorithm::Auto && !winograd_;
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());  // bit masks: each ISA holds those below
  const auto avx512_core = static_cast<unsigned>(dnnl::cpu_isa::avx512_core);
  amx_ = isa == static_cast<unsigned>(dnnl::cpu_isa::avx512_core_amx);
  gemm_conv_ =
      options.conv_algorithm == ConvAlgorithm::Gemm ? GemmConv::Always
      : (options.conv_algorithm == ConvAlgorithm::Auto || measure_winograd_) && (isa & avx512_core) == avx512_core
          ? GemmConv::SmallImages
          : GemmConv::Never;
  omp_set_num_threads(threads_);
}

CpuBackend::~CpuBackend() = default;

double CpuBackend::conversion_seconds() const { return impl_->conversion_seconds; }

std::string CpuBackend::isa() const { return isa_name(); }

std::string CpuBackend::description() const {
  const dnnl_version_t* v = dnnl_version();
  std::ostringstream out;
  // The CPU's model first, as a GPU's description names the GPU: runs and reports say which machine timed them.
  const std::string model = cpu_model_name();
  out << "cpu (" << (model == "unknown CPU" ? "" : model + ", ") << "oneDNN " << v->major << '.' << v->minor << '.'
      << v->patch << ", " << isa() << ", " << threads_ << (threads_ == 1 ? " thread" : " threads");
  if (winograd_) out << ", FP32 3x3 convolutions by Winograd F(2x2,3x3)";
  // The rules of `auto` are said as rules: which convolutions they take depends on the run's precision and shapes,
  // and this line is the same for every run of one setting, so that runs compare by it.
  if (winograd_where_emulation_pays_)
    out << ", Winograd where a run's emulated 16-bit 3x3 convolutions have 128 channels or more over 14x14 or more";
  if (measure_winograd_) out << ", FP32 3x3 convolutions by Winograd F(2x2,3x3) or direct, measured per shape";
  if (gemm_conv_ == GemmConv::Always) out << ", convolutions as matrix products";
  if (gemm_conv_ == GemmConv::SmallImages) out << ", matrix products where convolutions' images are small";
  out << ')';
  return out.str();
}

std::string CpuBackend::bf16_implementation() const { return impl_->emulate_bf16 ? "" : onednn_bf16_convolution(); }

Capabilities CpuBackend::capabilities() const {
  Capabilities caps;
  caps.device = device();
  caps.device_name = cpu_model_name();
  caps.isa = isa();
  caps.memory_bytes = static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
  caps.updates_read_16bit_gradients = true;
  caps.fp16 = {true, false,
               "emulated by the engine: FP16 storage and range, FP32 arithmetic (oneDNN has no FP16 compute on "
               "the CPU); faithful numerics, no faster arithmetic than FP32",
               0, ""};
  caps.tf32 = {false, false,
               "TF32 is a tensor-core format of NVIDIA GPUs; on the CPU it would be FP32 under another name", 0, ""};
  caps.fp8 = {true, false,
              "emulated by the engine on every instruction set: E4M3 and E5M2 values held in FP32 (their products "
              "exact there), FP32 accumulation; faithful numerics, no faster arithmetic than FP32",
              0, ""};
  const std::string onednn = onednn_bf16_convolution();
  const std::string engine_emulation = "emulated by the engine (BF16 storage and rounding, FP32 arithmetic): ";
  // Measured, but said in words: the ratio varies a little from process to process, and what two runs print of
  // the same CPU should read the same.
  const bool bf16_faster = bf16_rate_ratio() >= kNativeBf16MinRateRatio;
  const std::string rates = bf16_faster ? "its BF16 multiply-adds outpace its FP32 ones (measured)"
                                        : "its BF16 multiply-adds are slower than its FP32 ones (measured)";
  if (impl_->bf16_mode == CpuBf16::Emulated) {
    const bool plain_avx512 = !onednn.empty() && !runs_bf16_natively(onednn);
    caps.bf16 = {true, false, engine_emulation + "on request",
                 plain_avx512 ? kBf16SpeedPlainAvx512 : kBf16SpeedEngineEmulated,
                 plain_avx512 ? kBf16SpeedPlainAvx512Source : kBf16SpeedSource};
  } else if (onednn.empty()) {
    caps.bf16 = {true, false, engine_emulation + "oneDNN has no BF16 convolutions below AVX-512 (" + isa() + " here)",
                 kBf16SpeedEngineEmulated, kBf16SpeedSource};
  } else if (!runs_bf16_natively(onednn)) {
    caps.bf16 = {true, false,
                 engine_emulation + "this AVX-512 CPU has no BF16 instructions, and oneDNN's own emulation (" + onednn +
                     ") is slower",
                 kBf16SpeedPlainAvx512, kBf16SpeedPlainAvx512Source};
  } else if (impl_->emulate_bf16) {
    caps.bf16 = {true, false,
                 engine_emulation + "this CPU has AVX512-BF16 but no AMX, and " + rates +
                     ", so oneDNN's BF16 convolutions (" + onednn +
                     ") would be slower than FP32 ones (AMPWB_CPU_BF16=native takes them)",
                 kBf16SpeedEmulatedOverSlowBf16, kBf16SpeedSlowBf16Source};
  } else if (onednn.find("amx") != std::string::npos) {
    caps.bf16 = {true, true, "native on AMX tiles (oneDNN " + onednn + ")", kBf16SpeedAmx, kBf16SpeedAmxSource};
  } else if (bf16_faster) {
    caps.bf16 = {true, true, "native on AVX512-BF16 (oneDNN " + onednn + "): " + rates + ", no AMX",
                 kBf16SpeedAvx512Bf16, kBf16SpeedAvx512Bf16Source};
  } else {  // AMPWB_CPU_BF16=native where the emulation would be faster
    caps.bf16 = {true, true,
                 "native on AVX512-BF16 (oneDNN " + onednn + ") on request, although " + rates +
                     ": slower than the engine's emulation here",
                 0, ""};
  }
  return caps;
}

}  // namespace ampwb
