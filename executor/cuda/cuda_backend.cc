// CudaBackend: availability, per-device streams and allocators, copies.
#include "executor/cuda/cuda_backend.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "executor/cuda/cuda_kernels.h"
#include "executor/cuda/cuda_status.h"
#include "executor/cuda/cuda_stream.h"
#include "executor/cuda/launch.h"

namespace pdist::exec::cuda {

CudaBackend& CudaBackend::Instance() {
  static CudaBackend* backend = new CudaBackend();  // never destroyed: its streams outlive every tensor
  return *backend;
}

absl::Status CudaBackend::CheckAvailable(const Device& device) const {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    cudaGetLastError();
    return absl::FailedPreconditionError(absl::StrCat("device ", device.ToString(), " asked for, but cudaGetDeviceCount: ",
                                                      cudaGetErrorName(error), ": ", cudaGetErrorString(error),
                                                      " (no NVIDIA GPU or driver on this machine?)"));
  }
  if (device.index >= count) {
    return absl::FailedPreconditionError(absl::StrCat("device ", device.ToString(), " asked for, but this machine has ",
                                                      count, " CUDA device", count == 1 ? "" : "s"));
  }
  return absl::OkStatus();
}

void CudaBackend::RegisterKernels(KernelRegistry& registry) const { RegisterCudaKernels(registry); }

CudaBackend::PerDevice& CudaBackend::Open(const Device& device) {
  std::lock_guard<std::mutex> lock(mu_);
  PerDevice& d = devices_[device.index];
  if (d.allocator == nullptr) {
    cudaSetDevice(device.index);
    cudaStreamCreateWithFlags(&d.compute, cudaStreamNonBlocking);
    d.allocator = std::make_unique<CudaAllocator>(device, d.compute);
  }
  return d;
}

cudaStream_t CudaBackend::CommunicationStream(const Device& device, int lane) {
  PerDevice& d = Open(device);
  std::lock_guard<std::mutex> lock(mu_);
  while (static_cast<int>(d.communication.size()) <= lane) {
    cudaStream_t handle = nullptr;
    cudaSetDevice(device.index);
    cudaStreamCreateWithFlags(&handle, cudaStreamNonBlocking);
    d.communication.push_back(handle);
  }
  return d.communication[static_cast<size_t>(lane)];
}

Allocator& CudaBackend::allocator(const Device& device) { return *Open(device).allocator; }

std::unique_ptr<Stream> CudaBackend::NewStream(const Device& device, StreamPurpose purpose, int lane) {
  const cudaStream_t handle = purpose == StreamPurpose::kCompute ? Open(device).compute
                                                                 : CommunicationStream(device, std::max(0, lane));
  cudaSetDevice(device.index);  // the rank's thread runs on its device from here on
  return std::make_unique<CudaStream>(device, handle);
}

absl::Status CudaBackend::Copy(const Tensor& src, Tensor& dst, Stream* stream) {
  if (src.type() != dst.type()) {
    return absl::InvalidArgumentError(absl::StrCat("CUDA copy from ", src.type().ToString(), " to ", dst.type().ToString()));
  }
  const Device& gpu = src.device().is_cpu() ? dst.device() : src.device();
  auto* cuda_stream = dynamic_cast<CudaStream*>(stream);
  cudaStream_t handle = cuda_stream != nullptr ? cuda_stream->handle() : compute_stream(gpu);
  cudaSetDevice(gpu.index);
  PDIST_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst.raw(), src.raw(), static_cast<size_t>(src.num_bytes()),
                                             cudaMemcpyDefault, handle));
  if (stream == nullptr) PDIST_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(handle));
  return absl::OkStatus();
}

absl::Status CudaBackend::SwapBlocks(const Tensor& src, Tensor& dst, int64_t a, int64_t b, int64_t chunk,
                                     Stream* stream) {
  // Walk dst [b, a, chunk] in order; src's element (i, j, k) is at (i·b + j)·chunk + k.
  StridedIndex<2> index;
  index.rank = 3;
  const int64_t shape[3] = {b, a, chunk};
  const int64_t src_strides[3] = {chunk, b * chunk, 1};
  const int64_t dst_strides[3] = {a * chunk, chunk, 1};
  for (int d = 0; d < 3; ++d) {
    index.shape[d] = shape[d];
    index.stride[0][d] = src_strides[d];
    index.stride[1][d] = dst_strides[d];
  }
  auto* cuda_stream = dynamic_cast<CudaStream*>(stream);
  return CudaStatus(LaunchStridedCopy(static_cast<int>(ir::DataTypeSize(src.dtype())), src.raw(), dst.raw(),
                                      a * b * chunk, index,
                                      cuda_stream != nullptr ? cuda_stream->handle() : compute_stream(src.device())),
                    "swapping blocks");
}

absl::Status CudaBackend::CopyBytes(const Tensor& src, int64_t src_offset, Tensor& dst, int64_t dst_offset,
                                    int64_t bytes, Stream* stream) {
  auto* cuda_stream = dynamic_cast<CudaStream*>(stream);
  PDIST_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(static_cast<char*>(dst.raw()) + dst_offset, static_cast<const char*>(src.raw()) + src_offset,
                      static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice,
                      cuda_stream != nullptr ? cuda_stream->handle() : compute_stream(src.device())));
  return absl::OkStatus();
}

cudaStream_t CudaBackend::compute_stream(const Device& device) { return Open(device).compute; }

cudaStream_t StreamOf(const KernelContext& ctx) {
  if (auto* stream = dynamic_cast<CudaStream*>(ctx.stream())) return stream->handle();
  return CudaBackend::Instance().compute_stream(ctx.device());  // a kernel called outside a run
}

}  // namespace pdist::exec::cuda
