// The CUDA backend's allocator: stream-ordered allocation from the device's memory pool
// (cudaMallocAsync), with the pool told to keep what it has (release threshold: all of it), so
// a freed block is reused by the next allocation without a cudaMalloc — a caching allocator
// whose cache is the driver's, ordered by streams rather than by host synchronisation.
//
// Blocks are allocated on the stream of the kernel that makes them and freed on the device's
// compute stream. A block read on the communication stream is kept alive by that stream until
// its work has run (executor/cuda/cuda_stream.h), and a compute kernel reads a collective's
// result only after waiting for its event, so freeing in compute-stream order never frees a
// block under a kernel that still reads it.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "executor/allocator.h"

namespace pdist::exec::cuda {

class CudaAllocator final : public Allocator {
 public:
  // `free_stream`: the device's compute stream, which every Free is ordered on.
  CudaAllocator(Device device, cudaStream_t free_stream);
  Device device() const override { return device_; }
  void* Allocate(int64_t bytes, Stream* stream) override;
  void Free(void* block, int64_t bytes, Stream* stream) override;
  AllocatorStats stats() const override;

 private:
  Device device_;
  cudaStream_t free_stream_;
  cudaMemPool_t pool_ = nullptr;
  std::atomic<int64_t> in_use_{0}, peak_in_use_{0}, allocations_{0};
};

}  // namespace pdist::exec::cuda
