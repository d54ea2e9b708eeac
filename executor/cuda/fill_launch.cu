// Device side of full: a bit pattern written to every element.
#include "executor/cuda/device_common.cuh"
#include "executor/cuda/launch.h"

namespace pdist::exec::cuda {
namespace {

template <typename E>
__global__ void FillKernel(E* out, int64_t n, E value) {
  PDIST_GRID_STRIDE_LOOP(i, n) { out[i] = value; }
}

}  // namespace

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
