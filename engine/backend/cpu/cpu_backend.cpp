// CPU backend: oneDNN 2.6 primitives (created once per shape/dtype/layout and cached) and OpenMP loops.
#include "backend/cpu/cpu_backend.h"

#include <omp.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <oneapi/dnnl/dnnl.hpp>
#include <sstream>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "core/convert16.h"
#include "core/error.h"
#include "core/half.h"

namespace ampwb {

using dnnl::memory;
using Tag = memory::format_tag;
using DnnlType = memory::data_type;
using Args = std::unordered_map<int, memory>;

namespace {

DnnlType dnnl_type(DType t) {
  switch (t) {
    case DType::F32:
      return DnnlType::f32;
    case DType::F16:
      return DnnlType::f16;
    case DType::BF16:
      return DnnlType::bf16;
    case DType::I32:
      return DnnlType::s32;
    case DType::U8:
      return DnnlType::u8;
  }
  return DnnlType::undef;
}

// The memory descriptor of a plain tensor: 4-D in its layout, other ranks row-major.
memory::desc plain_desc(const Tensor& t) {
  const memory::dims dims(t.shape().begin(), t.shape().end());
  Tag tag = Tag::undef;
  switch (t.rank()) {
    case 1:
      tag = Tag::a;
      break;
    case 2:
      tag = Tag::ab;
      break;
    case 3:
      tag = Tag::abc;
      break;
    case 4:
      tag = t.layout() == Layout::NHWC ? Tag::nhwc : Tag::nchw;
      break;
    default:
      throw Error("oneDNN descriptor for an unsupported rank: " + t.describe());
  }
  return memory::desc(dims, dnnl_type(t.dtype()), tag);
}

memory::desc any_desc(const Tensor& t) {
  return memory::desc(memory::dims(t.shape().begin(), t.shape().end()), dnnl_type(t.dtype()), Tag::any);
}

// A cache key from an op name, its tensors' descriptions and its scalar parameters.
template <class... Parts>
std::string make_key(const char* op, const Parts&... parts) {
  std::ostringstream key;
  key << op;
  auto add = [&key](const auto& part) {
    if constexpr (std::is_same_v<std::decay_t<decltype(part)>, Tensor>)
      key << '|' << part.describe();
    else
      key << '|' << part;
  };
  (add(parts), ...);
  return key.str();
}

// Element access for the OpenMP loops, which accept every floating storage type.
inline float load(const float* p, int64_t i) { return p[i]; }
inline float load(const Half* p, int64_t i) { return static_cast<float>(p[i]); }
inline float load(const BFloat16* p, int64_t i) { return static_cast<float>(p[i]); }
template <class T>
inline void store(T* p, int64_t i, float v) {
  if constexpr (std::is_same_v<T, float>)
    p[i] = v;
  else
    p[i] = T(v);
}

template <class Fn>
void dispatch_floating(DType t, Fn&& fn) {
  switch (t) {
    case DType::F32:
      fn(float{});
      return;
    case DType::F16:
      fn(Half{});
      return;
    case DType::BF16:
      fn(BFloat16{});
      return;
    default:
      throw Error(std::string("expected a floating tensor, got ") + dtype_name(t));
  }
}

void check_same(const Tensor& a, const Tensor& b, const char* what) {
  AMPWB_CHECK(a.shape() == b.shape() && a.dtype() == b.dtype() && a.layout() == b.layout(),
              what << ": " << a.describe() << " and " << b.describe() << " differ");
}

bool is_16bit(const Tensor& t) { return t.defined() && (t.dtype() == DType::F16 || t.dtype() == DType::BF16); }

// Whether to ask oneDNN for a primitive over these tensors: it has no FP16 compute on the CPU, and BF16 is
// computed in FP32 when the backend was asked to emulate it.
template <class... Tensors>
bool ask_onednn(bool emulate_bf16, const Tensors&... tensors) {
  auto emulated = [emulate_bf16](const Tensor& t) {
    return t.defined() && (t.dtype() == DType::F16 || (emulate_bf16 && t.dtype() == DType::BF16));
  };
  return !(emulated(tensors) || ...);
}

int64_t conv_out(int64_t in, int64_t kernel, int stride, int padding) {
  return (in + 2 * padding - kernel) / stride + 1;
}

// The instruction set oneDNN dispatches to (capped by ONEDNN_MAX_CPU_ISA), e.g. "avx512_core_bf16".
std::string isa_name() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41:
      return "sse41";
    case dnnl::cpu_isa::avx:
      return "avx";
    case dnnl::cpu_isa::avx2:
      return "avx2";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
    default:
      return "other";
  }
}

}  // namespace

// A cached primitive with the descriptors its execution needs.
struct Cached {
  Cached(dnnl::primitive p, memory::desc scratch, memory::desc work = {})
      : primitive(std::move(p)), scratchpad(std::move(scratch)), workspace(std::move(work)) {}
  dnnl::primitive primitive;
  memory::desc scratchpad;
  memory::desc workspace;
  memory::desc weights;                  // conv weights as the primitive wants them
  memory::desc user_weights;             // conv weights as stored in the tensor (OIHW)
  dnnl::primitive to_primitive_weights;  // reorders, made only where the two differ
  dnnl::primitive to_user_weights;
};

struct CpuBackend::Impl {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::unordered_map<std::string, Cached> cache;
  int threads = 1;

  dnnl::primitive_attr attr() const {
    dnnl::primitive_attr a;
    a.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // scratch memory comes from our allocator
    return a;
  }

  std::unordered_set<std::string> unimplemented;  // keys oneDNN has no primitive for on this CPU
  bool emulate_bf16 = false;

  const Cached& get(const std::string& key, const std::function<Cached()>& create) {
    const Cached* c = find(key, true, create);
    if (!c) throw Error("oneDNN implements no primitive for " + key + " on this CPU (" + isa_name() + ")");
    return *c;
  }

  // The primitive for `key`, created on first use; nullptr where the caller must emulate: when `ask` is false
  // (FP16, which oneDNN 2.6 cannot compute on the CPU) or when creating it answers "unimplemented" (BF16 below
  // AVX-512, or a convolution require_native_bf16 refuses). Asked once per key: the answer is cached either way.
  const Cached* find(const std::string& key, bool ask, const std::function<Cached()>& create) {
    omp_set_num_threads(threads);  // per calling thread: the trainer runs on its own thread
    if (!ask || unimplemented.count(key)) return nullptr;
    auto it = cache.find(key);
    if (it != cache.end()) return &it->second;
    try {
      return &cache.emplace(key, create()).first->second;
    } catch (const dnnl::error& e) {
      if (e.status == dnnl_unimplemented) {
        unimplemented.insert(key);
        return nullptr;
      }
      throw Error("oneDNN cannot run " + key + ": " + e.what() + " (status " + std::to_string(e.status) + ")");
    }
  }

  const Cached* find_maxpool_forward(const Tensor& x, const Tensor& y, PoolParams p);  // also decides backward

  memory wrap(const memory::desc& md, const void* data) const { return memory(md, engine, const_cast<void*>(data)); }
  memory wrap(const Tensor& t) const { return wrap(plain_desc(t), t.data()); }

  void run(const Cached& c, Args args) {
    Tensor scratch;
    if (c.scratchpad.get_size() > 0) {
      scratch = Tensor::empty({static_cast<int64_t>(c.scratchpad.get_size())}, DType::U8);
      args.insert({DNNL_ARG_SCRATCHPAD, wrap(c.scratchpad, scratch.data())});
    }
    c.primitive.execute(stream, args);
    stream.wait();
  }

  void reorder(const dnnl::primitive& r, const memory& from, const memory& to) {
    r.execute(stream, {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}});
    stream.wait();
  }

  // Conv weights in the primitive's layout: the tensor itself, or a reordered copy kept alive by `holder`.
  memory primitive_weights(const Cached& c, const Tensor& w, Tensor& holder) {
    if (!c.to_primitive_weights) return wrap(c.user_weights, w.data());
    holder = Tensor::empty({static_cast<int64_t>(c.weights.get_size())}, DType::U8);
    memory m = wrap(c.weights, holder.data());
    reorder(c.to_primitive_weights, wrap(c.user_weights, w.data()), m);
    return m;
  }

  void set_weight_reorders(Cached& c, const memory::desc& primitive_md, const Tensor& w) {
    c.weights = primitive_md;
    c.user_weights = plain_desc(w);
    if (c.weights != c.user_weights) {
      c.to_primitive_weights = dnnl::reorder(dnnl::reorder::primitive_desc(engine, c.user_weights, engine, c.weights));
      c.to_user_weights = dnnl::reorder(dnnl::reorder::primitive_desc(engine, c.weights, engine, c.user_weights));
    }
  }

  dnnl::convolution_forward::primitive_desc conv_forward_pd(const Tensor& x, const Tensor& w, const Tensor& y,
                                                            ConvParams p) const {
    const memory::dims stride{p.stride, p.stride}, pad{p.padding, p.padding};
    auto d = dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                             plain_desc(x), any_desc(w), plain_desc(y), stride, pad, pad);
    return dnnl::convolution_forward::primitive_desc(d, attr(), engine);
  }
};

CpuBackend::CpuBackend(const BackendOptions& options) : impl_(std::make_unique<Impl>()) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads_ = options.threads > 0 ? options.threads : cores;
#if defined(__SANITIZE_THREAD__)
  // libgomp is not instrumented: ThreadSanitizer cannot see its fork and join, and would report every parallel
  // loop as a race. Its builds run one OpenMP thread, so what it checks is the engine's own threads.
  threads_ = 1;
#endif
  impl_->threads = threads_;
  impl_->emulate_bf16 = options.emulate_bf16;
  omp_set_num_threads(threads_);
}

CpuBackend::~CpuBackend() = default;

std::string CpuBackend::isa() const { return isa_name(); }

std::string CpuBackend::description() const {
  const dnnl_version_t* v = dnnl_version();
  std::ostringstream out;
  out << "cpu (oneDNN " << v->major << '.' << v->minor << '.' << v->patch << ", " << isa() << ", " << threads_
      << (threads_ == 1 ? " thread)" : " threads)");
  return out.str();
}

namespace {
// oneDNN names its implementations "kind:isa", e.g. "brgconv:avx512_core_bf16", "jit_bf16:avx512_core" (its
// own BF16 emulation on plain AVX-512) or "brgconv:avx512_core_amx".
bool runs_bf16_natively(const std::string& implementation) {
  const std::string isa = implementation.substr(implementation.find(':') + 1);
  return isa.find("bf16") != std::string::npos || isa.find("amx") != std::string::npos;
}

// BF16 convolutions only where the CPU computes BF16 natively. oneDNN's own emulation on plain AVX-512 measured
// 1.8-2.7x slower than the engine's (widen, FP32 primitive, round: docs/benchmarks.md, "BF16 on every CPU path"),
// so such a primitive is refused as if unimplemented, and the engine emulates it.
void require_native_bf16(const dnnl::primitive_desc_base& pd, const Tensor& t) {
  if (t.dtype() == DType::BF16 && !runs_bf16_natively(pd.impl_info_str()))
    throw dnnl::error(dnnl_unimplemented, "oneDNN would emulate BF16 here");
}

// A 3x3 convolution from ResNet's second stage, batch 16: what oneDNN offers for BF16 training on this CPU.
std::string onednn_bf16_convolution(const dnnl::engine& engine) {
  const memory::dims x{16, 64, 28, 28}, w{64, 64, 3, 3}, unit{1, 1};
  try {
    auto d = dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                             memory::desc(x, DnnlType::bf16, Tag::nhwc),
                                             memory::desc(w, DnnlType::bf16, Tag::any),
                                             memory::desc(x, DnnlType::bf16, Tag::nhwc), unit, unit, unit);
    return dnnl::convolution_forward::primitive_desc(d, engine).impl_info_str();
  } catch (const dnnl::error&) {
    return "";
  }
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

// amp-bf16's training speed against fp32's on each path, measured by bench/bf16_paths.sh on an AMD EPYC (Zen 5),
// ResNet-18 at 64 px batch 32, 2 threads, medians of alternating rounds (docs/benchmarks.md, "BF16 on every CPU
// path"; at 224 px batch 16 native BF16 gains 1.7x, the emulation stays at 1.0x).
constexpr double kBf16SpeedAvx512Bf16 = 1.4;
constexpr double kBf16SpeedEngineEmulated = 1.0;
const char* const kBf16SpeedSource =
    "bench/bf16_paths.sh, ResNet-18 64 px batch 32 on an AMD EPYC Zen 5 (docs/benchmarks.md)";
}  // namespace

std::string CpuBackend::bf16_implementation() const {
  if (impl_->emulate_bf16) return "";
  const std::string implementation = onednn_bf16_convolution(impl_->engine);
  return runs_bf16_natively(implementation) ? implementation : "";
}

Capabilities CpuBackend::capabilities() const {
  Capabilities caps;
  caps.device_name = cpu_model_name();
  caps.isa = isa();
  caps.memory_bytes = static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
  caps.fp16 = {true, false,
               "emulated by the engine: FP16 storage and range, FP32 arithmetic (oneDNN has no FP16 compute on "
               "the CPU); faithful numerics, slower than FP32",
               0, ""};
  caps.tf32 = {false, false,
               "TF32 is a tensor-core format of NVIDIA GPUs; on the CPU it would be FP32 under another name", 0, ""};
  const std::string onednn = onednn_bf16_convolution(impl_->engine);
  const std::string engine_emulation = "emulated by the engine (BF16 storage and rounding, FP32 arithmetic): ";
  if (impl_->emulate_bf16) {
    caps.bf16 = {true, false, engine_emulation + "on request", kBf16SpeedEngineEmulated, kBf16SpeedSource};
  } else if (onednn.empty()) {
    caps.bf16 = {true, false, engine_emulation + "oneDNN has no BF16 convolutions below AVX-512 (" + isa() + " here)",
                 kBf16SpeedEngineEmulated, kBf16SpeedSource};
  } else if (!runs_bf16_natively(onednn)) {
    caps.bf16 = {true, false,
                 engine_emulation + "this AVX-512 CPU has no BF16 instructions, and oneDNN's own emulation (" + onednn +
                     ") is slower",
                 kBf16SpeedEngineEmulated, kBf16SpeedSource};
  } else if (onednn.find("amx") != std::string::npos) {
    caps.bf16 = {true, true, "native on AMX tiles (oneDNN " + onednn + ")", 0,
                 "not yet measured by ampwb on AMX; oneDNN's BF16 convolutions run 7-9x FP32 there"};
  } else {
    caps.bf16 = {true, true, "native on AVX512-BF16 (oneDNN " + onednn + "): multiply-adds at 2x FP32's rate, no AMX",
                 kBf16SpeedAvx512Bf16, kBf16SpeedSource};
  }
  return caps;
}

bool CpuBackend::supports(Op op, DType dtype) const {
  switch (op) {
    case Op::Convert:
      return true;
    case Op::SoftmaxCrossEntropy:
    case Op::SgdUpdate:
    case Op::AdamUpdate:
    case Op::ScaleCheck:
      return dtype == DType::F32;
    default:
      return is_floating(dtype);  // FP16 emulated (see the header)
  }
}

Tensor CpuBackend::widen(const Tensor& t) {
  if (!is_16bit(t)) return t;
  Tensor wide = Tensor::empty(t.shape(), DType::F32, t.layout());
  convert(t, wide);
  return wide;
}

Tensor CpuBackend::wide_output(const Tensor& t) {
  return is_16bit(t) ? Tensor::empty(t.shape(), DType::F32, t.layout()) : t;
}

void CpuBackend::narrow(const Tensor& wide, Tensor& out) {
  if (is_16bit(out)) convert(wide, out);
}

// ---- Convolution --------------------------------------------------------------------------------------------

namespace {
// x (N,C,H,W) NHWC -> (N,C,P,Q): the pixels at multiples of `stride`, those a 1x1 convolution reads.
Tensor sample_pixels(const Tensor& x, int stride, int64_t P, int64_t Q) {
  Tensor sampled = Tensor::empty({x.n(), x.c(), P, Q}, x.dtype(), Layout::NHWC);
  const size_t pixel_bytes = static_cast<size_t>(x.c()) * dtype_size(x.dtype());
  const auto* in = static_cast<const char*>(x.data());
  auto* out = static_cast<char*>(sampled.data());
  for (int64_t n = 0; n < x.n(); ++n)
    for (int64_t p = 0; p < P; ++p)
      for (int64_t q = 0; q < Q; ++q)
        std::memcpy(out + ((n * P + p) * Q + q) * pixel_bytes,
                    in + ((n * x.h() + p * stride) * x.w() + q * stride) * pixel_bytes, pixel_bytes);
  return sampled;
}
}  // namespace

void CpuBackend::conv2d_forward(const Tensor& x, const Tensor& w, Tensor& y, ConvParams p) {
  AMPWB_CHECK(x.rank() == 4 && w.rank() == 4 && y.rank() == 4 && w.c() == x.c() && y.c() == w.n() && y.n() == x.n() &&
                  y.h() == conv_out(x.h(), w.h(), p.stride, p.padding) &&
                  y.w() == conv_out(x.w(), w.w(), p.stride, p.padding),
              "conv2d_forward shapes: x " << x.describe() << " w " << w.describe() << " y " << y.describe());
  const Cached* c =
      impl_->find(make_key("conv_fwd", x, w, y, p.stride, p.padding), ask_onednn(impl_->emulate_bf16, x, w, y), [&] {
        auto pd = impl_->conv_forward_pd(x, w, y, p);
        require_native_bf16(pd, x);
        Cached c(dnnl::convolution_forward(pd), pd.scratchpad_desc());
        impl_->set_weight_reorders(c, pd.weights_desc(), w);
        return c;
      });
  if (!c) {  // emulated: FP32 compute on the 16-bit values, the result rounded to 16 bits
    Tensor y32 = wide_output(y);
    conv2d_forward(widen(x), widen(w), y32, p);
    return narrow(y32, y);
  }
  Tensor reordered;
  memory wm = impl_->primitive_weights(*c, w, reordered);
  impl_->run(*c, {{DNNL_ARG_SRC, impl_->wrap(x)}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, impl_->wrap(y)}});
}

void CpuBackend::conv2d_backward_data(const Tensor& dy, const Tensor& w, Tensor& dx, ConvParams p) {
  AMPWB_CHECK(
      dx.rank() == 4 && w.c() == dx.c() && dy.c() == w.n() && dy.h() == conv_out(dx.h(), w.h(), p.stride, p.padding),
      "conv2d_backward_data shapes: dy " << dy.describe() << " w " << w.describe() << " dx " << dx.describe());
  const auto key = make_key("conv_bwd_data", dy, w, dx, p.stride, p.padding);
  const Cached* c = impl_->find(key, ask_onednn(impl_->emulate_bf16, dy, w, dx), [&] {
    const memory::dims stride{p.stride, p.stride}, pad{p.padding, p.padding};
    auto hint = impl_->conv_forward_pd(dx, w, dy, p);
    auto d = dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, plain_desc(dx), any_desc(w),
                                                   plain_desc(dy), stride, pad, pad);
    auto pd = dnnl::convolution_backward_data::primitive_desc(d, impl_->attr(), impl_->engine, hint);
    require_native_bf16(pd, dx);
    Cached c(dnnl::convolution_backward_data(pd), pd.scratchpad_desc());
    impl_->set_weight_reorders(c, pd.weights_desc(), w);
    return c;
  });
  if (!c) {  // emulated: FP32 compute on the 16-bit values, the result rounded to 16 bits
    Tensor dx32 = wide_output(dx);
    conv2d_backward_data(widen(dy), widen(w), dx32, p);
    return narrow(dx32, dx);
  }
  Tensor reordered;
  memory wm = impl_->primitive_weights(*c, w, reordered);
  impl_->run(*c, {{DNNL_ARG_DIFF_DST, impl_->wrap(dy)}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DIFF_SRC, impl_->wrap(dx)}});
}

void CpuBackend::conv2d_backward_weights(const Tensor& x, const Tensor& dy, Tensor& dw, ConvParams p) {
  AMPWB_CHECK(
      x.rank() == 4 && dw.rank() == 4 && dw.c() == x.c() && dy.c() == dw.n() && dy.n() == x.n(),
      "conv2d_backward_weights shapes: x " << x.describe() << " dy " << dy.describe() << " dw " << dw.describe());
  // oneDNN 2.6.3's jit_1x1:avx2 gets the weight gradient of a strided 1x1 NHWC convolution wrong when a channel
  // count is not a multiple of 8 (test_ops under ONEDNN_MAX_CPU_ISA=AVX2 found it). The same gradient is that of
  // a stride-1 convolution over the input's sampled pixels, which every implementation gets right.
  if (dw.h() == 1 && dw.w() == 1 && p.stride > 1 && p.padding == 0 && x.layout() == Layout::NHWC &&
      (x.c() % 8 || dw.n() % 8))
    return conv2d_backward_weights(sample_pixels(x, p.stride, dy.h(), dy.w()), dy, dw, {1, 0});
  const auto key = make_key("conv_bwd_weights", x, dy, dw, p.stride, p.padding);
  const Cached* c = impl_->find(key, ask_onednn(impl_->emulate_bf16, x, dy, dw), [&] {
    const memory::dims stride{p.stride, p.stride}, pad{p.padding, p.padding};
    auto hint = impl_->conv_forward_pd(x, dw, dy, p);
    auto d = dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, plain_desc(x), any_desc(dw),
                                                      plain_desc(dy), stride, pad, pad);
    auto pd = dnnl::convolution_backward_weights::primitive_desc(d, impl_->attr(), impl_->engine, hint);
    require_native_bf16(pd, x);
    Cached c(dnnl::convolution_backward_weights(pd), pd.scratchpad_desc());
    impl_->set_weight_reorders(c, pd.diff_weights_desc(), dw);
    return c;
  });
  if (!c) {  // emulated: FP32 compute on the 16-bit values, the result rounded to 16 bits
    Tensor dw32 = wide_output(dw);
    conv2d_backward_weights(widen(x), widen(dy), dw32, p);
    return narrow(dw32, dw);
  }
  Tensor holder;
  memory dwm = impl_->wrap(c->user_weights, dw.data());
  if (c->to_user_weights) {
    holder = Tensor::empty({static_cast<int64_t>(c->weights.get_size())}, DType::U8);
    dwm = impl_->wrap(c->weights, holder.data());
  }
  impl_->run(*c, {{DNNL_ARG_SRC, impl_->wrap(x)}, {DNNL_ARG_DIFF_DST, impl_->wrap(dy)}, {DNNL_ARG_DIFF_WEIGHTS, dwm}});
  if (c->to_user_weights) impl_->reorder(c->to_user_weights, dwm, impl_->wrap(c->user_weights, dw.data()));
}

// ---- Batch normalization --------------------------------------------------------------------------------------

namespace {
const auto kScaleShift = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;

dnnl::batch_normalization_forward::primitive_desc bn_forward_pd(const dnnl::engine& engine,
                                                                const dnnl::primitive_attr& attr, const Tensor& x,
                                                                float eps) {
  auto d = dnnl::batch_normalization_forward::desc(dnnl::prop_kind::forward_training, plain_desc(x), eps, kScaleShift);
  return dnnl::batch_normalization_forward::primitive_desc(d, attr, engine);
}

void check_bn(const Tensor& x, const Tensor& y, std::initializer_list<const Tensor*> per_channel) {
  AMPWB_CHECK(x.rank() == 4, "batch norm expects (N,C,H,W), got " << x.describe());
  check_same(x, y, "batch norm input and output");
  for (const Tensor* t : per_channel)
    AMPWB_CHECK(t->dtype() == DType::F32 && t->numel() == x.c(),
                "batch norm per-channel tensor " << t->describe() << " for " << x.c() << " channels");
}
}  // namespace

void CpuBackend::batchnorm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                                            Tensor& batch_mean, Tensor& batch_var, Tensor& running_mean,
                                            Tensor& running_var, float momentum, float eps) {
  check_bn(x, y, {&gamma, &beta, &batch_mean, &batch_var, &running_mean, &running_var});
  const Cached* c = impl_->find(make_key("bn_fwd_train", x, eps), ask_onednn(impl_->emulate_bf16, x), [&] {
    auto pd = bn_forward_pd(impl_->engine, impl_->attr(), x, eps);
    return Cached(dnnl::batch_normalization_forward(pd), pd.scratchpad_desc());
  });
  if (!c) {  // emulated: FP32 compute on the 16-bit values, the result rounded to 16 bits
    Tensor y32 = wide_output(y);
    batchnorm_forward_training(widen(x), gamma, beta, y32, batch_mean, batch_var, running_mean, running_var, momentum,
                               eps);
    return narrow(y32, y);
  }
  impl_->run(*c, {{DNNL_ARG_SRC, impl_->wrap(x)},
                  {DNNL_ARG_DST, impl_->wrap(y)},
                  {DNNL_ARG_SCALE, impl_->wrap(gamma)},
                  {DNNL_ARG_SHIFT, impl_->wrap(beta)},
                  {DNNL_ARG_MEAN, impl_->wrap(batch_mean)},
                  {DNNL_ARG_VARIANCE, impl_->wrap(batch_var)}});
  // Running statistics as PyTorch keeps them: the variance unbiased (count / (count - 1)).
  const double count = static_cast<double>(x.n() * x.h() * x.w());
  const float unbias = count > 1 ? static_cast<float>(count / (count - 1)) : 1.0f;
  float* rm = running_mean.data_as<float>();
  float* rv = running_var.data_as<float>();
  const float* mean = batch_mean.data_as<float>();
  const float* var = batch_var.data_as<float>();
  for (int64_t ch = 0; ch < x.c(); ++ch) {
    rm[ch] = (1 - momentum) * rm[ch] + momentum * mean[ch];
    rv[ch] = (1 - momentum) * rv[ch] + momentum * var[ch] * unbias;
  }
}

void CpuBackend::batchnorm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                                             const Tensor& running_mean, const Tensor& running_var, float eps) {
  check_bn(x, y, {&gamma, &beta, &running_mean, &running_var});
  const Cached* c = impl_->find(make_key("bn_fwd_infer", x, eps), ask_onednn(impl_->emulate_bf16, x), [&] {
    auto d = dnnl::batch_normalization_forward::desc(dnnl::prop_kind::forward_inference, plain_desc(x), eps,
                                                     kScaleShift | dnnl::normalization_flags::use_global_stats);
    auto pd = dnnl::batch_normalization_forward::primitive_desc(d, impl_->attr(), impl_->engine);
    return Cached(dnnl::batch_normalization_forward(pd), pd.scratchpad_desc());
  });
  if (!c) {  // emulated: FP32 compute on the 16-bit values, the result rounded to 16 bits
    Tensor y32 = wide_output(y);
    batchnorm_forward_inference(widen(x), gamma, beta, y32, running_mean, running_var, eps);
    return narrow(y32, y);
  }
  impl_->run(*c, {{DNNL_ARG_SRC, impl_->wrap(x)},
                  {DNNL_ARG_DST, impl_->wrap(y)},
                  {DNNL_ARG_SCALE, impl_->wrap(gamma)},
                  {DNNL_ARG_SHIFT, impl_->wrap(beta)},
                  {DNNL_ARG_MEAN, impl_->wrap(running_mean)},
                  {DNNL_ARG_VARIANCE, impl_->wrap(running_var)}});
}

void CpuBackend::batchnorm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& batch_mean,
                                    const Tensor& batch_var, Tensor& dx, Tensor& dgamma, Tensor& dbeta, float eps) {
  check_bn(x, dy, {&gamma, &batch_mean, &batch_var, &dgamma, &dbeta});
  check_same(x, dx, "batch norm input and its gradient");
  const Cached* c = impl_->find(make_key("bn_bwd", x, eps), ask_onednn(impl_->emulate_bf16, x), [&] {
    auto hint = bn_forward_pd(impl_->engine, impl_->attr(), x, eps);
    auto d = dnnl::batch_normalization_backward::desc(dnnl::prop_kind::backward, plain_desc(dy), plain_desc(x), eps,
                                                      kScaleShift);
    auto pd = dnnl::batch_normalization_backward::primitive_desc(d, impl_->attr(), impl_->engine, hint);
    return Cached(dnnl::batch_normalization_backward(pd), pd.scratchpad_desc());
  });
  if (!c) {  // emulated: FP32 compute on the 16-bit values, the result rounded to 16 bits
    Tensor dx32 = wide_output(dx);
    batchnorm_backward(widen(x), widen(dy), gamma, batch_mean, batch_var, dx32, dgamma, dbeta, eps);
    return narrow(dx32, dx);
  }
  impl_->run(*c, {{DNNL_ARG_SRC, impl_->wrap(x)},
                  {DNNL_ARG_DIFF_DST, impl_->wrap(dy)},
                  {DNNL_ARG_SCALE, impl_->wrap(gamma)},
                  {DNNL_ARG_MEAN, impl_->wrap(batch_mean)},
                  // oneDNN 2.6 will not execute without a shift argument, though backward never reads it.
                  {DNNL_ARG_SHIFT, impl_->wrap(gamma)},
                  {DNNL_ARG_VARIANCE, impl_->wrap(batch_var)},
                  {DNNL_ARG_DIFF_SRC, impl_->wrap(dx)},
                  {DNNL_ARG_DIFF_SCALE, impl_->wrap(dgamma)},
                  {DNNL_ARG_DIFF_SHIFT, impl_->wrap(dbeta)}});
}

// ---- Elementwise --------------------------------------------------------------------------------------------

namespace {
// FP16 and BF16 share the sign in bit 15: positive means sign clear and magnitude non-zero, so ReLU and its
// gradient need no conversion (and stay exact) in 16-bit storage.
inline bool positive16(uint16_t bits) { return !(bits & 0x8000u) && (bits & 0x7fffu); }

// a + b for 16-bit floats: widened, added in FP32, rounded back, in chunks through small FP32 buffers.
void add_16bit(const uint16_t* a, const uint16_t* b, uint16_t* out, int64_t n, DType dtype, int threads) {
  constexpr int64_t kChunk = 1024;
  const bool bf16 = dtype == DType::BF16;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t start = 0; start < n; start += kChunk) {
    const int64_t count = std::min(kChunk, n - start);
    float wide_a[kChunk], wide_b[kChunk];
    (bf16 ? bf16_to_f32 : f16_to_f32)(a + start, wide_a, count, 1);
    (bf16 ? bf16_to_f32 : f16_to_f32)(b + start, wide_b, count, 1);
    for (int64_t i = 0; i < count; ++i) wide_a[i] += wide_b[i];
    (bf16 ? f32_to_bf16 : f32_to_f16)(wide_a, out + start, count, 1);
  }
}
}  // namespace

void CpuBackend::relu_forward(const Tensor& x, Tensor& y) {
  check_same(x, y, "relu input and output");
  const int64_t n = x.numel();
  if (dtype_size(x.dtype()) == 2) {
    const uint16_t* in = x.data_as<uint16_t>();
    uint16_t* out = y.data_as<uint16_t>();
#pragma omp parallel for simd num_threads(threads_) schedule(static)
    for (int64_t i = 0; i < n; ++i) out[i] = positive16(in[i]) ? in[i] : 0;
    return;
  }
  AMPWB_CHECK(x.dtype() == DType::F32, "relu of " << x.describe());
  const float* in = x.data_as<float>();
  float* out = y.data_as<float>();
#pragma omp parallel for simd num_threads(threads_) schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = in[i] > 0.0f ? in[i] : 0.0f;
}

void CpuBackend::relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx) {
  check_same(y, dy, "relu output and its gradient");
  check_same(y, dx, "relu output and the input gradient");
  const int64_t n = y.numel();
  if (dtype_size(y.dtype()) == 2) {
    const uint16_t* out = y.data_as<uint16_t>();
    const uint16_t* grad_out = dy.data_as<uint16_t>();
    uint16_t* grad_in = dx.data_as<uint16_t>();
#pragma omp parallel for simd num_threads(threads_) schedule(static)
    for (int64_t i = 0; i < n; ++i) grad_in[i] = positive16(out[i]) ? grad_out[i] : 0;
    return;
  }
  AMPWB_CHECK(y.dtype() == DType::F32, "relu of " << y.describe());
  const float* out = y.data_as<float>();
  const float* grad_out = dy.data_as<float>();
  float* grad_in = dx.data_as<float>();
#pragma omp parallel for simd num_threads(threads_) schedule(static)
  for (int64_t i = 0; i < n; ++i) grad_in[i] = out[i] > 0.0f ? grad_out[i] : 0.0f;
}

void CpuBackend::add(const Tensor& a, const Tensor& b, Tensor& y) {
  if (a.layout() != y.layout() || b.layout() != y.layout()) {  // the interface allows it: reorder to y's layout
    auto in_layout_of_y = [&](const Tensor& t) {
      if (t.layout() == y.layout()) return t;
      Tensor reordered = Tensor::empty(t.shape(), t.dtype(), y.layout());
      convert(t, reordered);
      return reordered;
    };
    return add(in_layout_of_y(a), in_layout_of_y(b), y);
  }
  check_same(a, b, "add operands");
  check_same(a, y, "add operand and output");
  const int64_t n = a.numel();
  if (dtype_size(a.dtype()) == 2)
    return add_16bit(a.data_as<uint16_t>(), b.data_as<uint16_t>(), y.data_as<uint16_t>(), n, a.dtype(), threads_);
  AMPWB_CHECK(a.dtype() == DType::F32, "add of " << a.describe());
  const float* pa = a.data_as<float>();
  const float* pb = b.data_as<float>();
  float* out = y.data_as<float>();
#pragma omp parallel for simd num_threads(threads_) schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = pa[i] + pb[i];
}

// ---- Pooling ------------------------------------------------------------------------------------------------

namespace {
dnnl::pooling_forward::primitive_desc maxpool_forward_pd(const dnnl::engine& engine, const dnnl::primitive_attr& attr,
                                                         const Tensor& x, const Tensor& y, PoolParams p) {
  const memory::dims stride{p.stride, p.stride}, kernel{p.kernel, p.kernel}, pad{p.padding, p.padding};
  auto d = dnnl::pooling_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::pooling_max, plain_desc(x),
                                       plain_desc(y), stride, kernel, pad, pad);
  return dnnl::pooling_forward::primitive_desc(d, attr, engine);
}
}  // namespace

const Cached* CpuBackend::Impl::find_maxpool_forward(const Tensor& x, const Tensor& y, PoolParams p) {
  return find(make_key("maxpool_fwd", x, y, p.kernel, p.stride, p.padding), ask_onednn(emulate_bf16, x), [&] {
    auto pd = maxpool_forward_pd(engine, attr(), x, y, p);
    return Cached(dnnl::pooling_forward(pd), pd.scratchpad_desc(), pd.workspace_desc());
  });
}

void CpuBackend::maxpool_forward(const Tensor& x, Tensor& y, Tensor& workspace, PoolParams p) {
  AMPWB_CHECK(x.rank() == 4 && y.rank() == 4 && y.c() == x.c() && y.n() == x.n() &&
                  y.h() == conv_out(x.h(), p.kernel, p.stride, p.padding) &&
                  y.w() == conv_out(x.w(), p.kernel, p.stride, p.padding),
              "maxpool_forward shapes: x " << x.describe() << " y " << y.describe());
  const Cached* c = impl_->find_maxpool_forward(x, y, p);
  if (!c) {  // emulated: FP32 compute on the 16-bit values, the result rounded to 16 bits
    Tensor y32 = wide_output(y);
    maxpool_forward(widen(x), y32, workspace, p);
    return narrow(y32, y);
  }
  workspace = Tensor::empty({static_cast<int64_t>(c->workspace.get_size())}, DType::U8);
  impl_->run(*c, {{DNNL_ARG_SRC, impl_->wrap(x)},
                  {DNNL_ARG_DST, impl_->wrap(y)},
                  {DNNL_ARG_WORKSPACE, impl_->wrap(c->workspace, workspace.data())}});
}

void CpuBackend::maxpool_backward(const Tensor& dy, const Tensor& workspace, Tensor& dx, PoolParams p) {
  // Emulated exactly where the forward pass was: the workspace comes from the primitive that ran there.
  if (!impl_->find_maxpool_forward(dx, dy, p)) {
    Tensor dx32 = wide_output(dx);
    maxpool_backward(widen(dy), workspace, dx32, p);
    return narrow(dx32, dx);
  }
  const Cached& c = impl_->get(make_key("maxpool_bwd", dy, dx, p.kernel, p.stride, p.padding), [&] {
    const memory::dims stride{p.stride, p.stride}, kernel{p.kernel, p.kernel}, pad{p.padding, p.padding};
    auto hint = maxpool_forward_pd(impl_->engine, impl_->attr(), dx, dy, p);
    auto d = dnnl::pooling_backward::desc(dnnl::algorithm::pooling_max, plain_desc(dx), plain_desc(dy), stride, kernel,
                                          pad, pad);
    auto pd = dnnl::pooling_backward::primitive_desc(d, impl_->attr(), impl_->engine, hint);
    return Cached(dnnl::pooling_backward(pd), pd.scratchpad_desc(), hint.workspace_desc());
  });
  AMPWB_CHECK(workspace.nbytes() == c.workspace.get_size(), "maxpool_backward: workspace from another shape");
  impl_->run(c, {{DNNL_ARG_DIFF_DST, impl_->wrap(dy)},
                 {DNNL_ARG_DIFF_SRC, impl_->wrap(dx)},
                 {DNNL_ARG_WORKSPACE, impl_->wrap(c.workspace, workspace.data())}});
}

void CpuBackend::global_avgpool_forward(const Tensor& x, Tensor& y) {
  AMPWB_CHECK(x.rank() == 4 && y.rank() == 2 && y.dim(0) == x.n() && y.dim(1) == x.c() && y.dtype() == x.dtype(),
              "global_avgpool_forward shapes: x " << x.describe() << " y " << y.describe());
  const int64_t N = x.n(), C = x.c(), HW = x.h() * x.w();
  dispatch_floating(x.dtype(), [&](auto type_tag) {
    using T = decltype(type_tag);
    const T* in = x.data_as<T>();
    T* out = y.data_as<T>();
    const bool nhwc = x.layout() == Layout::NHWC;
#pragma omp parallel for num_threads(threads_) schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      std::vector<double> sum(C, 0.0);
      for (int64_t s = 0; s < HW; ++s)
        for (int64_t ch = 0; ch < C; ++ch) sum[ch] += load(in, nhwc ? (n * HW + s) * C + ch : (n * C + ch) * HW + s);
      for (int64_t ch = 0; ch < C; ++ch) store(out, n * C + ch, static_cast<float>(sum[ch] / HW));
    }
  });
}

void CpuBackend::global_avgpool_backward(const Tensor& dy, Tensor& dx) {
  AMPWB_CHECK(
      dx.rank() == 4 && dy.rank() == 2 && dy.dim(0) == dx.n() && dy.dim(1) == dx.c() && dy.dtype() == dx.dtype(),
      "global_avgpool_backward shapes: dy " << dy.describe() << " dx " << dx.describe());
  const int64_t N = dx.n(), C = dx.c(), HW = dx.h() * dx.w();
  dispatch_floating(dx.dtype(), [&](auto type_tag) {
    using T = decltype(type_tag);
    const T* grad_out = dy.data_as<T>();
    T* grad_in = dx.data_as<T>();
    const bool nhwc = dx.layout() == Layout::NHWC;
    const float inv = 1.0f / static_cast<float>(HW);
#pragma omp parallel for num_threads(threads_) schedule(static)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < HW; ++s)
        for (int64_t ch = 0; ch < C; ++ch)
          store(grad_in, nhwc ? (n * HW + s) * C + ch : (n * C + ch) * HW + s, load(grad_out, n * C + ch) * inv);
  });
}

// ---- Inner product --------------------------------------------------------------------------------------------

namespace {
dnnl::inner_product_forward::primitive_desc linear_forward_pd(const dnnl::engine& engine,
                                                              const dnnl::primitive_attr& attr, const Tensor& x,
                                                              const Tensor& w, const Tensor& b, const Tensor& y) {
  auto d = dnnl::inner_product_forward::desc(dnnl::prop_kind::forward_training, plain_desc(x), plain_desc(w),
                                             plain_desc(b), plain_desc(y));
  return dnnl::inner_product_forward::primitive_desc(d, attr, engine);
}
}  // namespace

void CpuBackend::linear_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) {
  AMPWB_CHECK(x.rank() == 2 && w.rank() == 2 && y.rank() == 2 && w.dim(1) == x.dim(1) && y.dim(0) == x.dim(0) &&
                  y.dim(1) == w.dim(0) && b.numel() == w.dim(0),
              "linear_forward shapes: x " << x.describe() << " w " << w.describe() << " y " << y.describe());
  const Cached* c = impl_->find(make_key("linear_fwd", x, w, b, y), ask_onednn(impl_->emulate_bf16, x, w, b, y), [&] {
    auto pd = linear_forward_pd(impl_->engine, impl_->attr(), x, w, b, y);
    return Cached(dnnl::inner_product_forward(pd), pd.scratchpad_desc());
  });
  if (!c) {  // emulated: FP32 compute on the 16-bit values, the result rounded to 16 bits
    Tensor y32 = wide_output(y);
    linear_forward(widen(x), widen(w), widen(b), y32);
    return narrow(y32, y);
  }
  impl_->run(*c, {{DNNL_ARG_SRC, impl_->wrap(x)},
                  {DNNL_ARG_WEIGHTS, impl_->wrap(w)},
                  {DNNL_ARG_BIAS, impl_->wrap(b)},
                  {DNNL_ARG_DST, impl_->wrap(y)}});
}

void CpuBackend::linear_backward(const Tensor& dy, const Tensor& x, const Tensor& w, Tensor& dx, Tensor& dw,
                                 Tensor& db) {
  const bool ask = ask_onednn(impl_->emulate_bf16, dy, x, w, dx, dw, db);
  const Cached* data = !dx.defined() ? nullptr : impl_->find(make_key("linear_bwd_data", dy, w, dx), ask, [&] {
    Tensor bias_like = Tensor::empty({w.dim(0)}, w.dtype());
    auto hint = linear_forward_pd(impl_->engine, impl_->attr(), dx, w, bias_like, dy);
    auto d = dnnl::inner_product_backward_data::desc(plain_desc(dx), plain_desc(w), plain_desc(dy));
    auto pd = dnnl::inner_product_backward_data::primitive_desc(d, impl_->attr(), impl_->engine, hint);
    return Cached(dnnl::inner_product_backward_data(pd), pd.scratchpad_desc());
  });
  const Cached* weights = impl_->find(make_key("linear_bwd_weights", x, dy, dw, db), ask, [&] {
    auto hint = linear_forward_pd(impl_->engine, impl_->attr(), x, dw, db, dy);
    auto d = dnnl::inner_product_backward_weights::desc(plain_desc(x), plain_desc(dw), plain_desc(db), plain_desc(dy));
    auto pd = dnnl::inner_product_backward_weights::primitive_desc(d, impl_->attr(), impl_->engine, hint);
    return Cached(dnnl::inner_product_backward_weights(pd), pd.scratchpad_desc());
  });
  if (!weights || (dx.defined() && !data)) {  // emulated, as in linear_forward
    Tensor dx32 = wide_output(dx), dw32 = wide_output(dw), db32 = wide_output(db);
    linear_backward(widen(dy), widen(x), widen(w), dx32, dw32, db32);
    narrow(dx32, dx);
    narrow(dw32, dw);
    return narrow(db32, db);
  }
  if (data) {
    impl_->run(*data, {{DNNL_ARG_DIFF_DST, impl_->wrap(dy)},
                       {DNNL_ARG_WEIGHTS, impl_->wrap(w)},
                       {DNNL_ARG_DIFF_SRC, impl_->wrap(dx)}});
  }
  impl_->run(*weights, {{DNNL_ARG_SRC, impl_->wrap(x)},
                        {DNNL_ARG_DIFF_DST, impl_->wrap(dy)},
                        {DNNL_ARG_DIFF_WEIGHTS, impl_->wrap(dw)},
                        {DNNL_ARG_DIFF_BIAS, impl_->wrap(db)}});
}

// ---- Conversion -----------------------------------------------------------------------------------------------

namespace {
// FP32 <-> FP16/BF16 in one layout through the engine's own kernels (core/convert16.h): exact round-to-nearest-even
// with signed zeros, subnormals and FP16 overflow to inf, as GPUs store them (oneDNN's reorder drops the sign of
// -0 and flushes FP32 subnormals on the way to BF16). False for any other pair.
bool convert_directly(const Tensor& src, Tensor& dst, int threads) {
  if (src.layout() != dst.layout() && src.rank() == 4) return false;
  const int64_t n = src.numel();
  const DType from = src.dtype(), to = dst.dtype();
  if (from == DType::F32 && to == DType::F16)
    f32_to_f16(src.data_as<float>(), dst.data_as<uint16_t>(), n, threads);
  else if (from == DType::F16 && to == DType::F32)
    f16_to_f32(src.data_as<uint16_t>(), dst.data_as<float>(), n, threads);
  else if (from == DType::F32 && to == DType::BF16)
    f32_to_bf16(src.data_as<float>(), dst.data_as<uint16_t>(), n, threads);
  else if (from == DType::BF16 && to == DType::F32)
    bf16_to_f32(src.data_as<uint16_t>(), dst.data_as<float>(), n, threads);
  else
    return false;
  return true;
}
}  // namespace

void CpuBackend::convert(const Tensor& src, Tensor& dst) {
  AMPWB_CHECK(src.shape() == dst.shape(), "convert: shapes differ: " << src.describe() << " -> " << dst.describe());
  AMPWB_CHECK(src.device().is_cpu() && dst.device().is_cpu(),
              "the CPU backend converts CPU tensors only: " << src.describe() << " -> " << dst.describe());
  if (convert_directly(src, dst, threads_)) return;
  if (is_16bit(src) || is_16bit(dst)) {
    // Never through oneDNN's reorder, which drops the sign of -0 and flushes BF16 subnormals (test_ops found it):
    // a copy where only the storage moves, else the dtype changes in our kernels and the layout in FP32.
    if (src.dtype() == dst.dtype() && (src.layout() == dst.layout() || src.rank() != 4)) {
      std::memcpy(dst.data(), src.data(), src.nbytes());
      return;
    }
    Tensor wide = Tensor::empty(src.shape(), DType::F32, is_16bit(src) ? src.layout() : dst.layout());
    convert(src, wide);
    return convert(wide, dst);
  }
  const Cached* c = impl_->find(make_key("convert", src, dst), true, [&] {
    auto pd =
        dnnl::reorder::primitive_desc(impl_->engine, plain_desc(src), impl_->engine, plain_desc(dst), impl_->attr());
    return Cached(dnnl::reorder(pd), pd.scratchpad_desc());
  });
  AMPWB_CHECK(c, "oneDNN cannot convert " << src.describe() << " to " << dst.describe());
  impl_->run(*c, {{DNNL_ARG_FROM, impl_->wrap(src)}, {DNNL_ARG_TO, impl_->wrap(dst)}});
}

// ---- Loss and optimizers ----------------------------------------------------------------------------------------

void CpuBackend::softmax_cross_entropy(const Tensor& logits, const Tensor& labels, float label_smoothing,
                                       float grad_scale, Tensor& dlogits) {
  AMPWB_CHECK(logits.rank() == 2 && logits.dtype() == DType::F32 && labels.dtype() == DType::I32 &&
                  labels.numel() == logits.dim(0),
              "softmax_cross_entropy: logits " << logits.describe() << " labels " << labels.describe());
  check_same(logits, dlogits, "logits and their gradient");
  const int64_t N = logits.dim(0), K = logits.dim(1);
  const float* z = logits.data_as<float>();
  const int32_t* y = labels.data_as<int32_t>();
  float* dz = dlogits.data_as<float>();
  const double off_target = label_smoothing / K, on_target = 1.0 - label_smoothing + off_target;
  double total = 0.0;
  int64_t correct = 0;
  for (int64_t n = 0; n < N; ++n) {
    AMPWB_CHECK(y[n] >= 0 && y[n] < K, "label " << y[n] << " outside [0, " << K << ")");
    const float* row = z + n * K;
    double max = row[0];
    bool top1 = true;  // the label's logit above every other
    for (int64_t k = 1; k < K; ++k) max = std::max(max, static_cast<double>(row[k]));
    for (int64_t k = 0; k < K; ++k) top1 = top1 && (k == y[n] || !(row[k] >= row[y[n]]));
    correct += top1;
    double sum = 0.0;
    for (int64_t k = 0; k < K; ++k) sum += std::exp(row[k] - max);
    const double log_sum = std::log(sum) + max;
    for (int64_t k = 0; k < K; ++k) {
      const double target = k == y[n] ? on_target : off_target;
      total -= target * (row[k] - log_sum);
      dz[n * K + k] = static_cast<float>((std::exp(row[k] - log_sum) - target) / N) * grad_scale;
    }
  }
  scalars_.loss = total / N;
  scalars_.correct = correct;
}

void CpuBackend::sgd_update(Tensor& param, const Tensor& grad, Tensor& momentum_buffer, const SgdParams& p) {
  check_same(param, grad, "SGD parameter and gradient");
  const int64_t n = param.numel();
  float* w = param.data_as<float>();
  const float* g = grad.data_as<float>();
  float* buf = p.momentum != 0.0f ? momentum_buffer.data_as<float>() : nullptr;
#pragma omp parallel for simd num_threads(threads_) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    float d = g[i] + p.weight_decay * w[i];
    if (buf) {
      buf[i] = p.first_step ? d : p.momentum * buf[i] + d;  // PyTorch: no dampening, buffer starts at d
      d = p.nesterov ? d + p.momentum * buf[i] : buf[i];
    }
    w[i] -= p.lr * d;
  }
}

void CpuBackend::adam_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamParams& p) {
  check_same(param, grad, "Adam parameter and gradient");
  const int64_t n = param.numel();
  float* w = param.data_as<float>();
  const float* g = grad.data_as<float>();
  float* m1 = m.data_as<float>();
  float* m2 = v.data_as<float>();
  const double t = static_cast<double>(p.step);
  const float step_size = static_cast<float>(p.lr / (1.0 - std::pow(p.beta1, t)));
  const float bias2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(p.beta2, t)));
  const float decay = p.decoupled_weight_decay ? 1.0f - p.lr * p.weight_decay : 1.0f;
  const float l2 = p.decoupled_weight_decay ? 0.0f : p.weight_decay;
#pragma omp parallel for simd num_threads(threads_) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] + l2 * w[i];
    m1[i] = p.beta1 * m1[i] + (1 - p.beta1) * gi;
    m2[i] = p.beta2 * m2[i] + (1 - p.beta2) * gi * gi;
    w[i] = w[i] * decay - step_size * m1[i] / (std::sqrt(m2[i]) / bias2_sqrt + p.eps);
  }
}

void CpuBackend::scale_and_check(const std::vector<Tensor*>& tensors, float factor) {
  scalars_.nonfinite = false;
  scalars_.sum_of_squares = 0;
  for (Tensor* t : tensors) {
    AMPWB_CHECK(t->dtype() == DType::F32, "scale_and_check expects FP32 tensors, got " << t->describe());
    float* p = t->data_as<float>();
    const int64_t n = t->numel();
    double sum = 0;
    int nonfinite = 0;
#pragma omp parallel for simd num_threads(threads_) reduction(+ : sum) reduction(| : nonfinite)
    for (int64_t i = 0; i < n; ++i) {
      const float v = p[i] * factor;
      p[i] = v;
      sum += static_cast<double>(v) * v;
      nonfinite |= !std::isfinite(v);
    }
    scalars_.nonfinite = scalars_.nonfinite || nonfinite;
    scalars_.sum_of_squares += sum;
  }
}

}  // namespace ampwb
