// CUDA runtime errors as absl::Status, naming the call and the runtime's reason:
//
//   PDIST_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(...));  // "cudaMemcpyAsync(...): cudaErrorInvalidValue: invalid argument"
#pragma once

#include <cuda_runtime.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace pdist::exec::cuda {

inline absl::Status CudaStatus(cudaError_t error, const char* call) {
  if (error == cudaSuccess) return absl::OkStatus();
  const std::string message = absl::StrCat(call, ": ", cudaGetErrorName(error), ": ", cudaGetErrorString(error));
  if (error == cudaErrorMemoryAllocation) return absl::ResourceExhaustedError(message);
  if (error == cudaErrorNoDevice || error == cudaErrorInsufficientDriver || error == cudaErrorInvalidDevice) {
    return absl::FailedPreconditionError(message);
  }
  return absl::InternalError(message);
}

// A query's answer (cudaEventQuery, cudaStreamQuery) with cudaErrorNotReady — work still
// running, not a failure — cleared from the thread's last error, where the runtime may latch it:
// the next launch's cudaGetLastError would report it as that launch's own failure (PyTorch met
// this: pytorch/pytorch#18584, #61554).
inline cudaError_t Unlatched(cudaError_t query) {
  if (query == cudaErrorNotReady && cudaPeekAtLastError() == cudaErrorNotReady) (void)cudaGetLastError();
  return query;
}

}  // namespace pdist::exec::cuda

#define PDIST_CUDA_RETURN_IF_ERROR(call)                                               \
  do {                                                                                 \
    if (absl::Status pdist_cuda_status_ = ::pdist::exec::cuda::CudaStatus((call), #call); \
        !pdist_cuda_status_.ok()) {                                                    \
      return pdist_cuda_status_;                                                       \
    }                                                                                  \
  } while (false)
