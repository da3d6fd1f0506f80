// Tensor storage, construction and host conversions.
#include "core/tensor.h"

#include <atomic>
#include <cstring>
#include <sstream>

#include "core/error.h"
#include "core/fp8.h"
#include "core/half.h"

namespace ampwb {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32:
      return "f32";
    case DType::F16:
      return "f16";
    case DType::BF16:
      return "bf16";
    case DType::I32:
      return "i32";
    case DType::U8:
      return "u8";
    case DType::F8E4M3:
      return "f8e4m3";
    case DType::F8E5M2:
      return "f8e5m2";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::U8, DType::F8E4M3, DType::F8E5M2})
    if (name == dtype_name(t)) return t;
  return std::nullopt;
}

const char* layout_name(Layout l) { return l == Layout::NCHW ? "nchw" : "nhwc"; }

std::string Device::str() const {
  if (is_cpu()) return index == 0 ? std::string("cpu") : "cpu:" + std::to_string(index);  // cpu:N only in tests
  return "cuda:" + std::to_string(index);
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_str(const Shape& shape) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? "," : "") << shape[i];
  out << ']';
  return out.str();
}

namespace {
std::atomic<DeviceAllocatorFactory>& cuda_allocator_factory() {
  static std::atomic<DeviceAllocatorFactory> factory{nullptr};
  return factory;
}
}  // namespace

bool register_device_allocator(Device::Kind kind, DeviceAllocatorFactory factory) {
  AMPWB_CHECK(kind == Device::Kind::CUDA, "only CUDA devices take a registered allocator");
  cuda_allocator_factory() = factory;
  return true;
}

Allocator& allocator_for(Device device) {
  if (device.is_cpu()) return cpu_allocator();
  if (const DeviceAllocatorFactory factory = cuda_allocator_factory()) return factory(device.index);
  throw Error("no allocator registered for device " + device.str() + " (this build has no CUDA support)");
}

Storage::Storage(size_t bytes, Device device) : bytes_(bytes), device_(device) {
  data_ = allocator_for(device).allocate(bytes);
}

Storage::~Storage() { allocator_for(device_).release(data_, bytes_); }

Tensor Tensor::empty(Shape shape, DType dtype, Layout layout, Device device) {
  for (int64_t d : shape) AMPWB_CHECK(d >= 0, "negative dimension in shape " << shape_str(shape));
  Tensor t;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.layout_ = layout;
  t.device_ = device;
  t.storage_ = std::make_shared<Storage>(t.nbytes(), device);
  return t;
}

Tensor Tensor::zeros(Shape shape, DType dtype, Layout layout, Device device) {
  Tensor t = empty(std::move(shape), dtype, layout, device);
  t.zero_();
  return t;
}

Tensor Tensor::reshaped(Shape shape) const {
  AMPWB_CHECK(shape_numel(shape) == numel(), "cannot view " << describe() << " as " << shape_str(shape));
  AMPWB_CHECK(rank() != 4 || layout_ == Layout::NCHW || shape.size() == 4,
              "reshaping an NHWC tensor would reorder its elements: " << describe());
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::clone() const {
  AMPWB_CHECK(device_.is_cpu(), "clone() of a " << device_.str() << " tensor");
  Tensor t = empty(shape_, dtype_, layout_, device_);
  if (nbytes()) std::memcpy(t.data(), data(), nbytes());
  return t;
}

void Tensor::zero_() {
  AMPWB_CHECK(device_.is_cpu(), "zero_() of a " << device_.str() << " tensor");
  if (nbytes()) std::memset(data(), 0, nbytes());
}

std::string Tensor::describe() const {
  std::ostringstream out;
  out << dtype_name(dtype_) << shape_str(shape_);
  if (rank() == 4) out << ' ' << layout_name(layout_);
  out << ' ' << device_.str();
  return out.str();
}

int64_t offset4(const Tensor& t, int64_t n, int64_t c, int64_t h, int64_t w) {
  const int64_t C = t.c(), H = t.h(), W = t.w();
  return t.layout() == Layout::NCHW ? ((n * C + c) * H + h) * W + w : ((n * H + h) * W + w) * C + c;
}

namespace {
float load_as_float(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::F32:
      return t.data_as<float>()[i];
    case DType::F16:
      return half_bits_to_float(t.data_as<uint16_t>()[i]);
    case DType::BF16:
      return bfloat16_bits_to_float(t.data_as<uint16_t>()[i]);
    case DType::I32:
      return static_cast<float>(t.data_as<int32_t>()[i]);
    case DType::U8:
      return static_cast<float>(t.data_as<uint8_t>()[i]);
    case DType::F8E4M3:
      return e4m3_bits_to_float(t.data_as<uint8_t>()[i]);
    case DType::F8E5M2:
      return e5m2_bits_to_float(t.data_as<uint8_t>()[i]);
  }
  return 0.0f;
}
void store_float(Tensor& t, int64_t i, float v) {
  switch (t.dtype()) {
    case DType::F32:
      t.data_as<float>()[i] = v;
      break;
    case DType::F16:
      t.data_as<uint16_t>()[i] = float_to_half_bits(v);
      break;
    case DType::BF16:
      t.data_as<uint16_t>()[i] = float_to_bfloat16_bits(v);
      break;
    case DType::I32:
      t.data_as<int32_t>()[i] = static_cast<int32_t>(v);
      break;
    case DType::U8:
      t.data_as<uint8_t>()[i] = static_cast<uint8_t>(v);
      break;
    case DType::F8E4M3:
      t.data_as<uint8_t>()[i] = float_to_e4m3_bits(v);
      break;
    case DType::F8E5M2:
      t.data_as<uint8_t>()[i] = float_to_e5m2_bits(v);
      break;
  }
}
// Storage index of the i-th element in logical row-major order.
int64_t storage_index(const Tensor& t, int64_t i) {
  if (t.rank() != 4 || t.layout() == Layout::NCHW) return i;
  const int64_t W = t.w(), H = t.h(), C = t.c();
  const int64_t w = i % W, h = (i / W) % H, c = (i / (W * H)) % C, n = i / (W * H * C);
  return offset4(t, n, c, h, w);
}
}  // namespace

std::vector<float> to_float_vector(const Tensor& t) {
  AMPWB_CHECK(t.device().is_cpu(), "to_float_vector of a " << t.device().str() << " tensor");
  std::vector<float> out(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) out[i] = load_as_float(t, storage_index(t, i));
  return out;
}

Tensor tensor_from_floats(const std::vector<float>& values, Shape shape, DType dtype, Layout layout) {
  Tensor t = Tensor::empty(std::move(shape), dtype, layout);
  AMPWB_CHECK(static_cast<int64_t>(values.size()) == t.numel(),
              values.size() << " values for a tensor of shape " << shape_str(t.shape()));
  for (int64_t i = 0; i < t.numel(); ++i) store_float(t, storage_index(t, i), values[i]);
  return t;
}

}  // namespace ampwb
