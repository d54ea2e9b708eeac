// ChooseDevice: a device name resolved against the launcher's environment and this build.
#include "engine/device_choice.h"

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "executor/backend.h"
#include "executor/kernel.h"
#include "ir/op_def.h"
#include "ir/status.h"

namespace pdist::engine {

absl::StatusOr<exec::Device> ChooseDevice(const std::string& name) {
  PDIST_ASSIGN_OR_RETURN(exec::Device device, exec::ParseDevice(name));
  if (name == "cuda") {
    if (const char* local_rank = std::getenv("LOCAL_RANK"); local_rank != nullptr && *local_rank != '\0') {
      int index = -1;
      if (!absl::SimpleAtoi(local_rank, &index) || index < 0) {
        return absl::InvalidArgumentError(absl::StrCat("LOCAL_RANK='", local_rank, "' is not a GPU index"));
      }
      device.index = index;
    }
  }
  PDIST_RETURN_IF_ERROR(exec::BackendFor(device).status());
  if (!device.is_cpu()) {
    // The backend is there and so is the GPU, but training needs a kernel for every op and the
    // engine's tensors on the device: say how far the backend is rather than fail on an op.
    const size_t cuda_ops = exec::KernelRegistry::Global().OpTypes(device.type).size();
    const size_t cpu_ops = exec::KernelRegistry::Global().OpTypes(exec::DeviceType::kCPU).size();
    return absl::UnimplementedError(absl::StrCat(
        "training on ", device.ToString(), " is not available yet: the CUDA backend has kernels for ", cuda_ops, " of ",
        cpu_ops, " ops and the engine keeps its tensors on the host (docs/gpu.md); use --device cpu"));
  }
  return device;
}

}  // namespace pdist::engine
