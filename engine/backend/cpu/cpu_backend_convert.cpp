// CPU conversions between dtypes and layouts, and the FP16/BF16 emulation helpers built on them (widen,
// wide_output, narrow): the oneDNN-less paths compute in FP32 and round back through these.
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_backend_impl.h"
#include "core/convert16.h"

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
}  // namespace ampwb
