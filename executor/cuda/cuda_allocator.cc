// CudaAllocator: cudaMallocAsync on the device's default pool, kept cached.
#include "executor/cuda/cuda_allocator.h"

#include <cstdint>

#include "absl/strings/str_format.h"
#include "executor/cuda/cuda_stream.h"

namespace pdist::exec::cuda {

CudaAllocator::CudaAllocator(Device device, cudaStream_t free_stream) : device_(device), free_stream_(free_stream) {
  cudaSetDevice(device.index);
  if (cudaDeviceGetDefaultMemPool(&pool_, device.index) == cudaSuccess) {
    uint64_t keep_everything = UINT64_MAX;
    cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep_everything);
  }
}

void* CudaAllocator::Allocate(int64_t bytes, Stream* stream) {
  auto* cuda_stream = dynamic_cast<CudaStream*>(stream);
  cudaStream_t handle = cuda_stream != nullptr ? cuda_stream->handle() : free_stream_;
  cudaSetDevice(device_.index);
  void* block = nullptr;
  const cudaError_t error = cudaMallocAsync(&block, static_cast<size_t>(bytes > 0 ? bytes : 1), handle);
  if (error != cudaSuccess) {
    cudaGetLastError();  // clear it: the caller reports it as a Status
    throw OutOfMemory(absl::StrFormat("out of memory on %s allocating %d bytes: %s (%s)", device_.ToString(), bytes,
                                      cudaGetErrorString(error), stats().ToString()));
  }
  allocations_.fetch_add(1, std::memory_order_relaxed);
  const int64_t now = in_use_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  int64_t peak = peak_in_use_.load(std::memory_order_relaxed);
  while (now > peak && !peak_in_use_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
  return block;
}

void CudaAllocator::Free(void* block, int64_t bytes, Stream* /*stream*/) {
  cudaFreeAsync(block, free_stream_);
  in_use_.fetch_sub(bytes, std::memory_order_relaxed);
}

AllocatorStats CudaAllocator::stats() const {
  AllocatorStats s;
  s.in_use = in_use_.load(std::memory_order_relaxed);
  s.peak_in_use = peak_in_use_.load(std::memory_order_relaxed);
  s.allocations = allocations_.load(std::memory_order_relaxed);
  if (pool_ != nullptr) {
    uint64_t reserved = 0, reserved_peak = 0;
    cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrReservedMemCurrent, &reserved);
    cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrReservedMemHigh, &reserved_peak);
    s.reserved = static_cast<int64_t>(reserved);
    s.peak_reserved = static_cast<int64_t>(reserved_peak);
  }
  return s;
}

}  // namespace pdist::exec::cuda
