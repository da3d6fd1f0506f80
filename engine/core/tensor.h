// Tensor: a shape, an element type, a layout and a device over reference-counted storage.
//
// Shapes are logical: a 4-D tensor is always (N, C, H, W) whatever its layout. Copies share storage (like
// torch.Tensor); clone() copies the data. A tensor knows nothing about backends: ops live in Backend.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/dtype.h"
#include "core/error.h"

namespace ampwb {

using Shape = std::vector<int64_t>;

int64_t shape_numel(const Shape& shape);
std::string shape_str(const Shape& shape);  // "[16,64,56,56]"

class Storage {
 public:
  Storage(size_t bytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  Device device_;
};

Allocator& allocator_for(Device device);
// How a backend above core/ provides memory for its device kind (the CUDA backend registers its caching allocator
// when its code is linked in): core never calls up into a backend by name.
using DeviceAllocatorFactory = Allocator& (*)(int device_index);
bool register_device_allocator(Device::Kind kind, DeviceAllocatorFactory factory);

class Tensor {
 public:
  Tensor() = default;
  static Tensor empty(Shape shape, DType dtype, Layout layout = Layout::NCHW, Device device = {});
  static Tensor zeros(Shape shape, DType dtype, Layout layout = Layout::NCHW, Device device = {});

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const { return shape_.at(i < 0 ? i + rank() : i); }
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  Layout layout() const { return layout_; }
  Device device() const { return device_; }

  void* data() const { return storage_ ? storage_->data() : nullptr; }
  template <class T>
  T* data_as() const {
    return static_cast<T*>(data());
  }

  // Logical dimensions of a 4-D tensor.
  int64_t n() const { return dim(0); }
  int64_t c() const { return dim(1); }
  int64_t h() const { return dim(2); }
  int64_t w() const { return dim(3); }

  // The same storage seen with another shape of equal size (row-major tensors only).
  Tensor reshaped(Shape shape) const;
  Tensor clone() const;  // CPU only
  void zero_();          // CPU only
  bool same_storage(const Tensor& other) const { return storage_ == other.storage_; }
  std::string describe() const;  // "f32[16,64,56,56] nhwc cpu"

 private:
  Shape shape_;
  DType dtype_ = DType::F32;
  Layout layout_ = Layout::NCHW;
  Device device_;
  std::shared_ptr<Storage> storage_;
};

// Host helpers, mainly for data loading and tests: values as floats in logical row-major (NCHW) order, and back.
std::vector<float> to_float_vector(const Tensor& t);
Tensor tensor_from_floats(const std::vector<float>& values, Shape shape, DType dtype = DType::F32,
                          Layout layout = Layout::NCHW);
// Offset of element (n, c, h, w) in a 4-D tensor's storage, in elements.
int64_t offset4(const Tensor& t, int64_t n, int64_t c, int64_t h, int64_t w);

}  // namespace ampwb
