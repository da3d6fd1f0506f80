// CPU conversions between dtypes and layouts, and the FP16/BF16 emulation helpers built on them (widen,
// wide_output, narrow): the oneDNN-less paths compute in FP32 and round back through these.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_backend_impl.h"
#include "core/convert16.h"
#include "core/convert8.h"
#include "core/error.h"

namespace ampwb {

using cpu_detail::make_key;
using cpu_detail::plain_desc;

namespace {
bool is_16bit(const Tensor& t) { return t.defined() && is_16bit(t.dtype()); }

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

void CpuBackend::convert(const Tensor& src, Tensor& dst) {
  AMPWB_CHECK(src.shape() == dst.shape(), "convert: shapes differ: " << src.describe() << " -> " << dst.describe());
  AMPWB_CHECK(src.device().is_cpu() && dst.device().is_cpu(),
              "the CPU backend converts CPU tensors only: " << src.describe() << " -> " << dst.describe());
  Impl::ConversionTimer timer(*impl_);
  if (is_fp8(src.dtype()) || is_fp8(dst.dtype())) {
    // FP8 storage reaches the host only from a device that computes in it (for a test or a look): element by element.
    const Tensor out = tensor_from_floats(to_float_vector(src), src.shape(), dst.dtype(), dst.layout());
    std::memcpy(dst.data(), out.data(), out.nbytes());
    return;
  }
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

// ---- FP8's scaled cast ----------------------------------------------------------------------------------------

namespace {
constexpr int64_t kScaledCastPiece = 4096;  // elements a thread widens, scales and rounds in its own buffer

void load_as_f32(const Tensor& t, int64_t begin, int64_t n, float* out) {
  if (t.dtype() == DType::F32)
    std::memcpy(out, t.data_as<float>() + begin, static_cast<size_t>(n) * sizeof(float));
  else
    widen_16bit(t.dtype(), t.data_as<uint16_t>() + begin, out, n);
}
void store_from_f32(const float* in, int64_t begin, int64_t n, Tensor& t) {
  if (t.dtype() == DType::F32)
    std::memcpy(t.data_as<float>() + begin, in, static_cast<size_t>(n) * sizeof(float));
  else
    round_to_16bit(t.dtype(), in, t.data_as<uint16_t>() + begin, n);
}
}  // namespace

void CpuBackend::scaled_cast(const Tensor& x, Tensor& y, ScaledCast cast, Tensor& stats) {
  AMPWB_CHECK(x.shape() == y.shape() && (x.layout() == y.layout() || x.rank() != 4) && is_floating(x.dtype()) &&
                  is_floating(y.dtype()),
              "scaled_cast takes floating tensors of one shape and layout: " << x.describe() << " -> " << y.describe());
  AMPWB_CHECK(!stats.defined() || (stats.dtype() == DType::U8 && stats.numel() == kFp8CastStatsBytes),
              "FP8 cast statistics are " << kFp8CastStatsBytes << " bytes (U8), not " << stats.describe());
  Impl::ConversionTimer timer(*impl_);
  const float factor = cast.scale.on_host();
  const int64_t n = x.numel(), pieces = (n + kScaledCastPiece - 1) / kScaledCastPiece;
  std::vector<Fp8CastStats> partial(static_cast<size_t>(std::max(threads_, 1)));
#pragma omp parallel num_threads(threads_)
  {
    std::vector<float> in(kScaledCastPiece), out(kScaledCastPiece);
    Fp8CastStats mine;
#pragma omp for schedule(static)
    for (int64_t piece = 0; piece < pieces; ++piece) {
      const int64_t begin = piece * kScaledCastPiece, len = std::min(kScaledCastPiece, n - begin);
      load_as_f32(x, begin, len, in.data());
      for (int64_t i = 0; i < len; ++i) {
        out[i] = in[i] * factor;
        mine.amax = std::fmax(mine.amax, std::fabs(in[i]));
        mine.saturated += cast.to_fp8 && fp8_clips(cast.format, std::fabs(out[i]));
      }
      if (cast.to_fp8) {
        round_through_fp8(cast.format, out.data(), len);
        for (int64_t i = 0; i < len; ++i) mine.underflowed += in[i] != 0.0f && out[i] == 0.0f;
      }
      store_from_f32(out.data(), begin, len, y);
    }
    partial[static_cast<size_t>(omp_get_thread_num())] = mine;
  }
  if (!stats.defined()) return;
  Fp8CastStats total;
  total.count = n;
  for (const Fp8CastStats& p : partial) {
    total.amax = std::fmax(total.amax, p.amax);
    total.saturated += p.saturated;
    total.underflowed += p.underflowed;
  }
  std::memcpy(stats.data(), &total, sizeof total);
}

void CpuBackend::update_fp8_scalings(const std::vector<Fp8ScalingUpdate>& scalings) {
  for (const Fp8ScalingUpdate& u : scalings) {
    AMPWB_CHECK(u.state && u.stats && u.state->dtype() == DType::F32 && u.state->device().is_cpu() &&
                    u.stats->dtype() == DType::U8 && u.stats->numel() == kFp8CastStatsBytes,
                "update_fp8_scalings takes an F32 state and its cast's statistics on the host");
    Fp8CastStats stats;
    std::memcpy(&stats, u.stats->data(), sizeof stats);
    update_device_state(u.state->data_as<float>(), u.state->numel(), stats.amax, u.rule, u.scaled_max);
  }
}

}  // namespace ampwb
