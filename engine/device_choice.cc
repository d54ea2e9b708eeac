// ChooseDevice: a device name resolved against the launcher's environment and this build.
#include "engine/device_choice.h"

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "executor/backend.h"
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
  return device;
}

}  // namespace pdist::engine
