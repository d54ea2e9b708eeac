// CudaAllocator: cudaMallocAsync on the device's default pool, kept cached.
#include "executor/cuda/cuda_allocator.h"

#include <cstdint>
#include <string>

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
  const size_t size = static_cast<size_t>(bytes > 0 ? bytes : 1);
  cudaError_t error = cudaMallocAsync(&block, size, handle);
  if (error == cudaErrorMemoryAllocation) {
    // Blocks freed on the free stream are reusable by another stream only once that stream's work
    // before the free is known done: wait for it, hand the pool's unused memory back, and try
    // once more before calling it out of memory.
    cudaGetLastError();
    cudaStreamSynchronize(free_stream_);
    if (pool_ != nullptr) cudaMemPoolTrimTo(pool_, 0);
    error = cudaMallocAsync(&block, size, handle);
  }
  if (error != cudaSuccess) {
    cudaGetLastError();  // clear it: the caller reports it as a Status
    // Another error (an earlier kernel's fault, which the runtime reports from here on) is not
    // called a lack of memory.
    const std::string what = error == cudaErrorMemoryAllocation ? "out of memory" : "failed";
    throw OutOfMemory(absl::StrFormat("%s on %s allocating %d bytes: %s: %s (%s)", what, device_.ToString(), bytes,
                                      cudaGetErrorName(error), cudaGetErrorString(error), stats().ToString()));
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
