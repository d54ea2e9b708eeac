// ChooseDevice: a device name resolved against the launcher's environment and this build.
#include "engine/device_choice.h"

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "executor/backend.h"
#include "ir/status.h"

namespace pdist::engine {

absl::StatusOr<std::optional<int>> LocalRankFromEnv() {
  // An mpirun inside an sbatch script inherits the batch step's SLURM_LOCALID (0 on every rank):
  // the MPI launchers' own variables come before Slurm's.
  for (const char* variable : {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}) {
    const char* value = std::getenv(variable);
    if (value == nullptr || *value == '\0') continue;
    int index = -1;
    if (!absl::SimpleAtoi(value, &index) || index < 0) {
      return absl::InvalidArgumentError(absl::StrCat(variable, "='", value, "' is not a GPU index"));
    }
    return index;
  }
  return std::nullopt;
}

absl::StatusOr<exec::Device> ChooseDevice(const std::string& name) {
  PDIST_ASSIGN_OR_RETURN(exec::Device device, exec::ParseDevice(name));
  if (name == "cuda") {
    PDIST_ASSIGN_OR_RETURN(const std::optional<int> local_rank, LocalRankFromEnv());
    if (local_rank) device.index = *local_rank;
  }
  PDIST_RETURN_IF_ERROR(exec::BackendFor(device).status());
  return device;
}

}  // namespace pdist::engine
