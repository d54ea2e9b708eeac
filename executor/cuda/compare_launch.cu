// Device side of the comparisons (greater_than, less_than, equal) and where, over a broadcast walk.
#include <cstdint>

#include "executor/cuda/device_common.cuh"
#include "executor/cuda/launch.h"

namespace pdist::exec::cuda {
namespace {

template <typename S>
__global__ void CompareKernel(CompareOp op, const S* x, const S* y, bool* out, int64_t n, StridedIndex<2> index) {
  using C = typename Compute<S>::type;
  PDIST_GRID_STRIDE_LOOP(i, n) {
    int64_t offset[2];
    Offsets(index, i, offset);
    const C a = Load(x, offset[0]), b = Load(y, offset[1]);
    out[i] = op == CompareOp::kGreaterThan ? a > b : op == CompareOp::kLessThan ? a < b : a == b;
  }
}

template <typename E>
__global__ void WhereKernel(const bool* condition, const E* x, const E* y, E* out, int64_t n, StridedIndex<3> index) {
  PDIST_GRID_STRIDE_LOOP(i, n) {
    int64_t offset[3];
    Offsets(index, i, offset);
    out[i] = condition[offset[0]] ? x[offset[1]] : y[offset[2]];
  }
}

template <typename S>
cudaError_t CompareOf(CompareOp op, const void* x, const void* y, bool* out, int64_t n, const StridedIndex<2>& index,
                      cudaStream_t stream) {
  CompareKernel<S><<<Blocks(n), kThreads, 0, stream>>>(op, static_cast<const S*>(x), static_cast<const S*>(y), out, n,
                                                       index);
  return cudaGetLastError();
}

template <typename E>
cudaError_t WhereOf(const bool* condition, const void* x, const void* y, void* out, int64_t n,
                    const StridedIndex<3>& index, cudaStream_t stream) {
  WhereKernel<E><<<Blocks(n), kThreads, 0, stream>>>(condition, static_cast<const E*>(x), static_cast<const E*>(y),
                                                     static_cast<E*>(out), n, index);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchCompare(CompareOp op, CompareType type, const void* x, const void* y, bool* out, int64_t n,
                          const StridedIndex<2>& index, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (type) {
    case CompareType::kF32: return CompareOf<float>(op, x, y, out, n, index, stream);
    case CompareType::kF64: return CompareOf<double>(op, x, y, out, n, index, stream);
    case CompareType::kBF16: return CompareOf<__nv_bfloat16>(op, x, y, out, n, index, stream);
    case CompareType::kF16: return CompareOf<__half>(op, x, y, out, n, index, stream);
    case CompareType::kI32: return CompareOf<int32_t>(op, x, y, out, n, index, stream);
    case CompareType::kI64: return CompareOf<int64_t>(op, x, y, out, n, index, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t LaunchWhere(int element_size, const bool* condition, const void* x, const void* y, void* out, int64_t n,
                        const StridedIndex<3>& index, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (element_size) {
    case 1: return WhereOf<uint8_t>(condition, x, y, out, n, index, stream);
    case 2: return WhereOf<uint16_t>(condition, x, y, out, n, index, stream);
    case 4: return WhereOf<uint32_t>(condition, x, y, out, n, index, stream);
    case 8: return WhereOf<uint64_t>(condition, x, y, out, n, index, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace pdist::exec::cuda
