// The CUDA backend: kernels in executor/cuda/ (host side *_kernels.cc, device side *.cu),
// CudaAllocator, and per device one compute stream and a communication stream per lane (the
// collectives', one per point-to-point direction) that live as long as the process (CudaStream
// wraps them per run).
#pragma once

#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "executor/backend.h"
#include "executor/cuda/cuda_allocator.h"
#include "executor/kernel.h"

namespace pdist::exec::cuda {

class CudaBackend final : public Backend {
 public:
  static CudaBackend& Instance();
  DeviceType type() const override { return DeviceType::kCUDA; }
  absl::Status CheckAvailable(const Device& device) const override;
  void RegisterKernels(KernelRegistry& registry) const override;
  Allocator& allocator(const Device& device) override;
  std::unique_ptr<Stream> NewStream(const Device& device, StreamPurpose purpose, int lane = 0) override;
  absl::Status Copy(const Tensor& src, Tensor& dst, Stream* stream) override;
  absl::Status SwapBlocks(const Tensor& src, Tensor& dst, int64_t a, int64_t b, int64_t chunk, Stream* stream) override;
  absl::Status CopyBytes(const Tensor& src, int64_t src_offset, Tensor& dst, int64_t dst_offset, int64_t bytes,
                         Stream* stream) override;
  // The device's compute stream (what a copy without a stream, or a kernel called outside a
  // run, is ordered on).
  cudaStream_t compute_stream(const Device& device);

 private:
  struct PerDevice {
    cudaStream_t compute = nullptr;
    std::vector<cudaStream_t> communication;  // by lane, made as they are first asked for
    std::unique_ptr<CudaAllocator> allocator;
  };
  PerDevice& Open(const Device& device);
  // The device's communication stream of `lane`, made on first use and kept.
  cudaStream_t CommunicationStream(const Device& device, int lane);

  std::mutex mu_;
  std::map<int, PerDevice> devices_;
};

// The stream a CUDA kernel enqueues on: its context's, or its device's compute stream.
cudaStream_t StreamOf(const KernelContext& ctx);

}  // namespace pdist::exec::cuda
