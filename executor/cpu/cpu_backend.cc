// CpuBackend: the host as a Backend.
#include "executor/cpu/cpu_backend.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "executor/cpu/cpu_kernels.h"
#include "executor/cpu_stream.h"

namespace pdist::exec::cpu {

CpuBackend& CpuBackend::Instance() {
  static CpuBackend* backend = new CpuBackend();
  return *backend;
}

absl::Status CpuBackend::CheckAvailable(const Device& device) const {
  if (device.is_cpu()) return absl::OkStatus();  // the host, or a host device cpu:N
  return absl::InvalidArgumentError(absl::StrCat("the CPU backend runs host devices, not '", device.ToString(), "'"));
}

void CpuBackend::RegisterKernels(KernelRegistry& registry) const { RegisterCpuKernels(registry); }

Allocator& CpuBackend::allocator(const Device& device) { return HostAllocator::Of(device); }

std::unique_ptr<Stream> CpuBackend::NewStream(const Device& /*device*/, StreamPurpose purpose, int /*lane*/) {
  if (purpose == StreamPurpose::kCompute) return std::make_unique<CpuInlineStream>();
  return std::make_unique<CpuWorkerStream>();
}

absl::Status CpuBackend::Copy(const Tensor& src, Tensor& dst, Stream* /*stream*/) {
  // Host devices share the host's memory: a copy between any two of them is a memcpy.
  if (!src.device().is_cpu() || !dst.device().is_cpu() || src.type() != dst.type()) {
    return absl::InvalidArgumentError(absl::StrCat("CPU copy from a ", src.device().ToString(), " ",
                                                   src.type().ToString(), " tensor to a ", dst.device().ToString(),
                                                   " ", dst.type().ToString(), " one"));
  }
  std::memcpy(dst.raw(), src.raw(), static_cast<size_t>(src.num_bytes()));
  return absl::OkStatus();
}

absl::Status CpuBackend::SwapBlocks(const Tensor& src, Tensor& dst, int64_t a, int64_t b, int64_t chunk,
                                    Stream* /*stream*/) {
  const int64_t chunk_bytes = chunk * ir::DataTypeSize(src.dtype());
  const auto* in = static_cast<const char*>(src.raw());
  auto* out = static_cast<char*>(dst.raw());
  for (int64_t i = 0; i < a; ++i) {
    for (int64_t j = 0; j < b; ++j) {
      std::memcpy(out + (j * a + i) * chunk_bytes, in + (i * b + j) * chunk_bytes, static_cast<size_t>(chunk_bytes));
    }
  }
  return absl::OkStatus();
}

absl::Status CpuBackend::CopyBytes(const Tensor& src, int64_t src_offset, Tensor& dst, int64_t dst_offset,
                                   int64_t bytes, Stream* /*stream*/) {
  std::memcpy(static_cast<char*>(dst.raw()) + dst_offset, static_cast<const char*>(src.raw()) + src_offset,
              static_cast<size_t>(bytes));
  return absl::OkStatus();
}

}  // namespace pdist::exec::cpu
