// Device side of full (a bit pattern written to every element) and of the strided copies of
// transpose, expand, slice and slice_grad (elements moved as bits, any dtype).
#include "executor/cuda/device_common.cuh"
#include "executor/cuda/launch.h"

namespace pdist::exec::cuda {
namespace {

template <typename E>
__global__ void FillKernel(E* out, int64_t n, E value) {
  PDIST_GRID_STRIDE_LOOP(i, n) { out[i] = value; }
}

template <typename E>
__global__ void StridedCopyKernel(const E* src, E* dst, int64_t n, StridedIndex<2> index) {
  PDIST_GRID_STRIDE_LOOP(i, n) {
    int64_t offset[2];
    Offsets(index, i, offset);
    dst[offset[1]] = src[offset[0]];
  }
}

template <typename E>
cudaError_t StridedCopyOf(const void* src, void* dst, int64_t n, const StridedIndex<2>& index, cudaStream_t stream) {
  StridedCopyKernel<<<Blocks(n), kThreads, 0, stream>>>(static_cast<const E*>(src), static_cast<E*>(dst), n, index);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchStridedCopy(int element_size, const void* src, void* dst, int64_t n, const StridedIndex<2>& index,
                              cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (element_size) {
    case 1: return StridedCopyOf<uint8_t>(src, dst, n, index, stream);
    case 2: return StridedCopyOf<uint16_t>(src, dst, n, index, stream);
    case 4: return StridedCopyOf<uint32_t>(src, dst, n, index, stream);
    case 8: return StridedCopyOf<uint64_t>(src, dst, n, index, stream);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t LaunchFill(void* out, int64_t n, int element_size, uint64_t pattern, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (element_size) {
    case 1: FillKernel<<<Blocks(n), kThreads, 0, stream>>>(static_cast<uint8_t*>(out), n, static_cast<uint8_t>(pattern)); break;
    case 2: FillKernel<<<Blocks(n), kThreads, 0, stream>>>(static_cast<uint16_t*>(out), n, static_cast<uint16_t>(pattern)); break;
    case 4: FillKernel<<<Blocks(n), kThreads, 0, stream>>>(static_cast<uint32_t*>(out), n, static_cast<uint32_t>(pattern)); break;
    case 8: FillKernel<<<Blocks(n), kThreads, 0, stream>>>(static_cast<uint64_t*>(out), n, pattern); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace pdist::exec::cuda
