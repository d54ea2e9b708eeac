// Tensor storage, conversion helpers.
#include "executor/tensor.h"

#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "absl/strings/str_cat.h"
#include "executor/allocator.h"
#include "executor/dtype_dispatch.h"

namespace pdist::exec {

Tensor Tensor::Empty(const TensorType& type) { return Empty(type, HostAllocator::Instance()); }

Tensor Tensor::Empty(const TensorType& type, Allocator& allocator, Stream* stream) {
  Tensor t;
  t.type_ = type;
  t.device_ = allocator.device();
  const int64_t bytes = type.num_bytes();
  void* block = allocator.Allocate(bytes, stream);
  t.buffer_ = std::shared_ptr<void>(block, [&allocator, bytes, stream](void* p) { allocator.Free(p, bytes, stream); });
  return t;
}

Tensor Tensor::Zeros(const TensorType& type) {
  Tensor t = Empty(type);
  std::memset(t.raw(), 0, static_cast<size_t>(type.num_bytes()));
  return t;
}

Tensor Tensor::Scalar(DataType dtype, double value) { return TensorFromDoubles({{}, dtype}, {value}); }

Tensor Tensor::Reshaped(const Shape& shape) const {
  Tensor t = *this;
  t.type_.shape = shape;
  return t;
}

namespace {

// A device tensor's bytes cannot be read on the host: `what` is a caller's mistake.
void CheckOnHost(const Tensor& t, const char* what) {
  if (!t.device().is_cpu()) {
    throw std::logic_error(absl::StrCat(what, " on a ", t.device().ToString(), " tensor: copy it to the host first"));
  }
}

// The allocator of host tensor `t`'s device: the host, or a host device cpu:N.
Allocator& HostAllocatorOf(const Tensor& t, const char* what) {
  CheckOnHost(t, what);
  return HostAllocator::Of(t.device());
}

}  // namespace

Tensor Tensor::Clone() const {
  Tensor t = Empty(type_, HostAllocatorOf(*this, "Tensor::Clone"));
  std::memcpy(t.raw(), raw(), static_cast<size_t>(num_bytes()));
  return t;
}

double Tensor::At(int64_t i) const {
  CheckOnHost(*this, "Tensor::At");
  double out = 0;
  PDIST_DISPATCH_ALL(dtype(), T, { out = static_cast<double>(static_cast<T>(data<T>()[i])); });
  return out;
}

Tensor CastTensor(const Tensor& src, DataType dtype) {
  Tensor dst = Tensor::Empty({src.shape(), dtype}, HostAllocatorOf(src, "CastTensor"));
  CastInto(src, dst);
  return dst;
}

void CastInto(const Tensor& src, Tensor& dst) {
  const int64_t n = src.num_elements();
  PDIST_DISPATCH_ALL(src.dtype(), S, {
    PDIST_DISPATCH_ALL(dst.dtype(), D, {
      const S* in = src.data<S>();
      D* out = dst.data<D>();
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<D>(static_cast<double>(in[i]));
    });
  });
}

Tensor TensorFromDoubles(const TensorType& type, const std::vector<double>& values) {
  return TensorFromDoubles(type, values, HostAllocator::Instance());
}

Tensor TensorFromDoubles(const TensorType& type, const std::vector<double>& values, Allocator& host) {
  Tensor t = Tensor::Empty(type, host);
  PDIST_DISPATCH_ALL(type.dtype, T, {
    T* out = t.data<T>();
    for (size_t i = 0; i < values.size(); ++i) out[i] = static_cast<T>(values[i]);
  });
  return t;
}

std::vector<double> TensorToDoubles(const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.num_elements()));
  for (int64_t i = 0; i < t.num_elements(); ++i) out[static_cast<size_t>(i)] = t.At(i);
  return out;
}

}  // namespace pdist::exec
