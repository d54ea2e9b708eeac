// Tensor: a typed, shaped view of a reference-counted buffer on one device.
//
// Copies share the buffer (like a shared_ptr); Clone() copies the bytes. The buffer comes from
// its device's Allocator (executor/allocator.h) and goes back to it when the last view is gone.
// Buffers are 64-byte aligned so Eigen's vectorised paths apply. Element access (data<T>(),
// At) is for host tensors; a device tensor is read on the host through ToDevice (backend.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "executor/device.h"
#include "ir/types.h"

namespace pdist::exec {

class Allocator;  // executor/allocator.h
class Stream;     // executor/stream.h

using ir::DataType;
using ir::Shape;
using ir::TensorType;

class Tensor {
 public:
  Tensor() = default;
  // Uninitialised host storage for `type`.
  static Tensor Empty(const TensorType& type);
  // Uninitialised storage for `type` from `allocator`, on its device, ordered after `stream`'s
  // work; freed in the order the allocator keeps (the CUDA allocator: the compute stream's,
  // executor/cuda/cuda_allocator.h). Throws OutOfMemory.
  static Tensor Empty(const TensorType& type, Allocator& allocator, Stream* stream = nullptr);
  static Tensor Zeros(const TensorType& type);
  // A scalar (shape []) of `dtype` holding `value`.
  static Tensor Scalar(DataType dtype, double value);

  bool defined() const { return buffer_ != nullptr; }
  const Device& device() const { return device_; }
  const TensorType& type() const { return type_; }
  const Shape& shape() const { return type_.shape; }
  DataType dtype() const { return type_.dtype; }
  int64_t num_elements() const { return type_.num_elements(); }
  int64_t num_bytes() const { return type_.num_bytes(); }

  template <typename T>
  T* data() { return static_cast<T*>(raw()); }
  template <typename T>
  const T* data() const { return static_cast<const T*>(raw()); }
  void* raw() const { return buffer_.get(); }

  // Same buffer, another shape with the same number of elements.
  Tensor Reshaped(const Shape& shape) const;
  // A deep copy, on the same host device (host tensors only).
  Tensor Clone() const;
  // Element `i` of a host tensor converted to double (for tests, losses and printing).
  double At(int64_t i) const;
  // Number of tensors sharing this buffer.
  long use_count() const { return buffer_.use_count(); }
  // Identity of the storage, for memory accounting.
  const void* buffer_id() const { return buffer_.get(); }

 private:
  TensorType type_;
  Device device_;
  std::shared_ptr<void> buffer_;
};

// Converts every element of a host tensor to another dtype, on the same host device.
Tensor CastTensor(const Tensor& src, DataType dtype);
// CastTensor into `dst`, a host tensor of src's shape (and any dtype), which it may share
// storage with (each element is read before it is written).
void CastInto(const Tensor& src, Tensor& dst);
// Fills a float/int tensor from doubles (row-major). Size must match. On the host, or from
// `host`, the allocator of a host device (a CPU kernel's context: KernelContext::allocator()).
Tensor TensorFromDoubles(const TensorType& type, const std::vector<double>& values);
Tensor TensorFromDoubles(const TensorType& type, const std::vector<double>& values, Allocator& host);
std::vector<double> TensorToDoubles(const Tensor& t);

}  // namespace pdist::exec
