// The list of backends built into this binary, and the lookups over it.
#include "absl/strings/str_cat.h"
#include "executor/backend.h"
#include "executor/cpu/cpu_backend.h"
#include "ir/status.h"
#ifdef PDIST_HAVE_CUDA
#include "executor/cuda/cuda_backend.h"
#endif

namespace pdist::exec {

const std::vector<Backend*>& Backends() {
  static const std::vector<Backend*>* backends = new std::vector<Backend*>{
      &cpu::CpuBackend::Instance(),
#ifdef PDIST_HAVE_CUDA
      &cuda::CudaBackend::Instance(),
#endif
  };
  return *backends;
}

absl::StatusOr<Backend*> BackendFor(const Device& device) {
  for (Backend* backend : Backends()) {
    if (backend->type() != device.type) continue;
    if (absl::Status available = backend->CheckAvailable(device); !available.ok()) return available;
    return backend;
  }
  if (device.type == DeviceType::kCUDA) {
    return absl::FailedPreconditionError(absl::StrCat(
        "device ", device.ToString(), " asked for, but this pdist was built without the CUDA backend: configure with "
        "-DPDIST_WITH_CUDA=ON on a machine with the CUDA toolkit and NCCL (docs/gpu.md)"));
  }
  return absl::FailedPreconditionError(absl::StrCat("no backend for device ", device.ToString()));
}

absl::StatusOr<Tensor> ToDevice(const Tensor& t, const Device& device) {
  if (t.device() == device) return t;
  PDIST_ASSIGN_OR_RETURN(Backend * to, BackendFor(device));
  PDIST_ASSIGN_OR_RETURN(Backend * from, BackendFor(t.device()));
  Tensor out = Tensor::Empty(t.type(), to->allocator(device));
  // The device side's backend copies: the host has no view of a device's memory.
  Backend* copier = device.is_cpu() ? from : to;
  PDIST_RETURN_IF_ERROR(copier->Copy(t, out, nullptr));
  return out;
}

}  // namespace pdist::exec
