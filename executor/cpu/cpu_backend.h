// The CPU backend: Eigen kernels (executor/cpu/*_kernels.cc), the host allocator, the calling
// thread as the compute stream and a worker thread as the communication stream.
#pragma once

#include "executor/backend.h"

namespace pdist::exec::cpu {

class CpuBackend final : public Backend {
 public:
  static CpuBackend& Instance();
  DeviceType type() const override { return DeviceType::kCPU; }
  absl::Status CheckAvailable(const Device& device) const override;
  void RegisterKernels(KernelRegistry& registry) const override;
  Allocator& allocator(const Device& device) override;
  std::unique_ptr<Stream> NewStream(const Device& device, StreamPurpose purpose, int lane = 0) override;
  absl::Status Copy(const Tensor& src, Tensor& dst, Stream* stream) override;
  absl::Status SwapBlocks(const Tensor& src, Tensor& dst, int64_t a, int64_t b, int64_t chunk, Stream* stream) override;
  absl::Status CopyBytes(const Tensor& src, int64_t src_offset, Tensor& dst, int64_t dst_offset, int64_t bytes,
                         Stream* stream) override;
};

}  // namespace pdist::exec::cpu
