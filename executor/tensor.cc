// Tensor storage, conversion helpers.
#include "executor/tensor.h"

#include <cstdlib>
#include <cstring>

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "executor/dtype_dispatch.h"

namespace pdist::exec {

namespace {

// glibc serves blocks above M_MMAP_THRESHOLD with a fresh mmap, and returns freed memory at the
// heap's top to the kernel above M_TRIM_THRESHOLD: every step then faults in its activations
// page by page again (measured: 7% of a dp2 step in page faults, 17% once frees also come from
// the communication thread). Keeping tensors on the heap makes a step reuse the last step's pages.
void KeepTensorsOnTheHeap() {
#ifdef __GLIBC__
  static const bool tuned = [] {
    mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's largest allowed value on 64-bit
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    return true;
  }();
  (void)tuned;
#endif
}

std::shared_ptr<void> Allocate(int64_t bytes) {
  KeepTensorsOnTheHeap();
  const size_t size = static_cast<size_t>((std::max<int64_t>(bytes, 1) + 63) / 64 * 64);
  void* p = std::aligned_alloc(64, size);
  if (p == nullptr) throw std::bad_alloc();
  return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
}
}  // namespace

Tensor Tensor::Empty(const TensorType& type) {
  Tensor t;
  t.type_ = type;
  t.buffer_ = Allocate(type.num_bytes());
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

Tensor Tensor::Clone() const {
  Tensor t = Empty(type_);
  std::memcpy(t.raw(), raw(), static_cast<size_t>(num_bytes()));
  return t;
}

double Tensor::At(int64_t i) const {
  double out = 0;
  PDIST_DISPATCH_ALL(dtype(), T, { out = static_cast<double>(static_cast<T>(data<T>()[i])); });
  return out;
}

Tensor CastTensor(const Tensor& src, DataType dtype) {
  Tensor dst = Tensor::Empty({src.shape(), dtype});
  const int64_t n = src.num_elements();
  PDIST_DISPATCH_ALL(src.dtype(), S, {
    PDIST_DISPATCH_ALL(dtype, D, {
      const S* in = src.data<S>();
      D* out = dst.data<D>();
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<D>(static_cast<double>(in[i]));
    });
  });
  return dst;
}

Tensor TensorFromDoubles(const TensorType& type, const std::vector<double>& values) {
  Tensor t = Tensor::Empty(type);
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
