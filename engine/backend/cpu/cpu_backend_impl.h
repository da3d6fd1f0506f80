// Private to engine/backend/cpu: the oneDNN helpers, the primitive cache (Cached) and CpuBackend::Impl shared by
// the cpu_backend*.cpp files.
#pragma once

#include <omp.h>

#include <chrono>
#include <functional>
#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <sstream>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/weight_layouts.h"
#include "core/convert16.h"
#include "core/error.h"

namespace ampwb {

using dnnl::memory;
using Tag = memory::format_tag;
using DnnlType = memory::data_type;
using Args = std::unordered_map<int, memory>;

// Helpers for the cpu_backend*.cpp files (each names the ones it uses).
namespace cpu_detail {

inline DnnlType dnnl_type(DType t) {
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
    case DType::F8E4M3:  // the CPU emulates FP8 in FP32 (Capabilities::fp8): oneDNN never sees it
    case DType::F8E5M2:
      return DnnlType::undef;
  }
  return DnnlType::undef;
}

// The memory descriptor of a plain tensor: 4-D in its layout, other ranks row-major.
inline memory::desc plain_desc(const Tensor& t) {
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

inline memory::desc any_desc(const Tensor& t) {
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

inline void check_same(const Tensor& a, const Tensor& b, const char* what) {
  AMPWB_CHECK(a.shape() == b.shape() && a.dtype() == b.dtype() && a.layout() == b.layout(),
              what << ": " << a.describe() << " and " << b.describe() << " differ");
}

// Whether to ask oneDNN for a primitive over these tensors: it has no FP16 compute on the CPU, and BF16 is
// computed in FP32 when the backend was asked to emulate it.
template <class... Tensors>
bool ask_onednn(bool emulate_bf16, const Tensors&... tensors) {
  auto emulated = [emulate_bf16](const Tensor& t) {
    return t.defined() && (t.dtype() == DType::F16 || (emulate_bf16 && t.dtype() == DType::BF16));
  };
  return !(emulated(tensors) || ...);
}

inline int64_t conv_out(int64_t in, int64_t kernel, int stride, int padding) {
  return (in + 2 * padding - kernel) / stride + 1;
}

// The instruction set oneDNN dispatches to (capped by ONEDNN_MAX_CPU_ISA), e.g. "avx512_core_bf16".
inline std::string isa_name() {
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

// oneDNN names its implementations "kind:isa", e.g. "brgconv:avx512_core_bf16", "jit_bf16:avx512_core" (its
// own BF16 emulation on plain AVX-512) or "brgconv:avx512_core_amx".
inline bool runs_bf16_natively(const std::string& implementation) {
  const std::string isa = implementation.substr(implementation.find(':') + 1);
  return isa.find("bf16") != std::string::npos || isa.find("amx") != std::string::npos;
}

// BF16 convolutions only where the CPU computes BF16 natively. oneDNN's own emulation on plain AVX-512 measured
// 1.8-2.7x slower than the engine's (widen, FP32 primitive, round: bench/bf16_paths.sh; docs/benchmarks.md, "AVX-512"),
// so such a primitive is refused as if unimplemented, and the engine emulates it.
inline void require_native_bf16(const dnnl::primitive_desc_base& pd, const Tensor& t) {
  if (t.dtype() == DType::BF16 && !runs_bf16_natively(pd.impl_info_str()))
    throw dnnl::error(dnnl_unimplemented, "oneDNN would emulate BF16 here");
}

// x (N,C,H,W) NHWC -> patches (N*P*Q, C*R*S), each output pixel's kernel window as a row of the weights orders it
// (OIHW where oihw, else OHWI); x itself where its pixels are the rows already (cpu_backend_gemm_conv.cpp).
Tensor im2col(const Tensor& x, int64_t R, int64_t S, bool oihw, ConvParams p, int64_t P, int64_t Q, int threads);

}  // namespace cpu_detail

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
  // to_primitive_weights' work done by the engine's own copy instead (weight_layouts.h): into backward data's
  // layout, or into the forward's BF16 one with blocks of forward_block output channels (0: not)
  bool backward_data_layout = false;
  int forward_block = 0;
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
  CpuBf16 bf16_mode = CpuBf16::Auto;              // as asked (BackendOptions, AMPWB_CPU_BF16)
  bool emulate_bf16 = false;                      // as decided: BF16 in FP32 primitives

  // Times the conversions made inside ops (CpuBackend::conversion_seconds); only the outermost of nested ones counts.
  double conversion_seconds = 0;
  int conversion_depth = 0;
  class ConversionTimer {
   public:
    explicit ConversionTimer(Impl& impl) : impl_(impl) {
      if (impl_.conversion_depth++ == 0) start_ = std::chrono::steady_clock::now();
    }
    ~ConversionTimer() {
      if (--impl_.conversion_depth == 0)
        impl_.conversion_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    }
    ConversionTimer(const ConversionTimer&) = delete;
    ConversionTimer& operator=(const ConversionTimer&) = delete;

   private:
    Impl& impl_;
    std::chrono::steady_clock::time_point start_;
  };

  const Cached& get(const std::string& key, const std::function<Cached()>& create) {
    const Cached* c = find(key, true, create);
    if (!c) throw Error("oneDNN implements no primitive for " + key + " on this CPU (" + cpu_detail::isa_name() + ")");
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
  memory wrap(const Tensor& t) const { return wrap(cpu_detail::plain_desc(t), t.data()); }

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
    ConversionTimer timer(*this);
    r.execute(stream, {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}});
    stream.wait();
  }

  // Conv weights in the primitive's layout: the tensor itself, or a reordered copy kept alive by `holder`.
  memory primitive_weights(const Cached& c, const Tensor& w, Tensor& holder) {
    if (!c.to_primitive_weights) return wrap(c.user_weights, w.data());
    holder = Tensor::empty({static_cast<int64_t>(c.weights.get_size())}, DType::U8);
    memory m = wrap(c.weights, holder.data());
    if (c.backward_data_layout) {
      ConversionTimer timer(*this);
      cpu_detail::to_backward_data_layout(w, holder.data(), threads);
    } else if (c.forward_block) {
      ConversionTimer timer(*this);
      cpu_detail::to_forward_layout(w, c.forward_block, holder.data(), threads);
    } else {
      reorder(c.to_primitive_weights, wrap(c.user_weights, w.data()), m);
    }
    return m;
  }

  // The FP32 primitive c's weights from FP16 or BF16 values w (the emulation), kept alive by `holder`: widened by
  // one reorder straight into the primitive's blocked layout where oneDNN's reorder for it is vectorised (BF16 on
  // AVX-512; exact: every 16-bit value is an FP32 one), else widened into `wide` (FP32, w's shape and layout) and
  // reordered from there (FP16, whose reorder in oneDNN 2.6 is its reference one, `simple:any`; BF16 below AVX-512).
  memory emulated_primitive_weights(const Cached& c, const Tensor& w, Tensor& wide, Tensor& holder) {
    auto [it, made] = widening_reorders.try_emplace({&c, w.dtype()});
    if (made && c.to_primitive_weights) {
      try {
        const dnnl::reorder::primitive_desc pd(engine, cpu_detail::plain_desc(w), engine, c.weights);
        if (std::string(pd.impl_info_str()).rfind("jit", 0) == 0) it->second = dnnl::reorder(pd);
      } catch (const dnnl::error&) {  // left null
      }
    }
    if (it->second) {
      holder = Tensor::empty({static_cast<int64_t>(c.weights.get_size())}, DType::U8);
      memory m = wrap(c.weights, holder.data());
      reorder(it->second, wrap(w), m);
      return m;
    }
    {
      ConversionTimer timer(*this);
      widen_16bit(w.dtype(), w.data_as<uint16_t>(), wide.data_as<float>(), w.numel(), threads);
    }
    return primitive_weights(c, wide, holder);
  }
  std::map<std::pair<const Cached*, DType>, dnnl::primitive> widening_reorders;  // cache entries never move

  void set_weight_reorders(Cached& c, const memory::desc& primitive_md, const Tensor& w) {
    c.weights = primitive_md;
    c.user_weights = cpu_detail::plain_desc(w);
    if (c.weights != c.user_weights) {
      c.to_primitive_weights = dnnl::reorder(dnnl::reorder::primitive_desc(engine, c.user_weights, engine, c.weights));
      c.to_user_weights = dnnl::reorder(dnnl::reorder::primitive_desc(engine, c.weights, engine, c.user_weights));
      using tag = memory::format_tag;
      const bool fp32 = w.dtype() == DType::F32;
      const auto type = fp32 ? memory::data_type::f32 : memory::data_type::bf16;
      c.backward_data_layout =
          cpu_detail::backward_data_layout_fits(w) &&
          c.weights == memory::desc(c.user_weights.dims(), type, fp32 ? tag::ABcd16a16b : tag::ABcd8a16b2a);
      for (const auto& [block, forward] : {std::pair{16, tag::AcdB16a2b}, {32, tag::AcdB32a2b}, {64, tag::AcdB64a2b}})
        if (cpu_detail::forward_layout_fits(w, block) &&
            c.weights == memory::desc(c.user_weights.dims(), type, forward))
          c.forward_block = block;
    }
  }

  // oneDNN's matrix product c = a x b, cached under key; nullptr where oneDNN has none for these types
  // here, or not asked (the emulated types).
  const Cached* matmul(const std::string& key, const memory::desc& a, const memory::desc& b, const memory::desc& c,
                       bool ask = true) {
    return find(key, ask, [&] {
      const auto pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), attr(), engine);
      return Cached(dnnl::matmul(pd), pd.scratchpad_desc());
    });
  }

  dnnl::convolution_forward::primitive_desc conv_forward_pd(const Tensor& x, const Tensor& w, const Tensor& y,
                                                            ConvParams p) const {
    const memory::dims stride{p.stride, p.stride}, pad{p.padding, p.padding};
    auto d = dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                             cpu_detail::plain_desc(x), cpu_detail::any_desc(w),
                                             cpu_detail::plain_desc(y), stride, pad, pad);
    return dnnl::convolution_forward::primitive_desc(d, attr(), engine);
  }
};

}  // namespace ampwb
