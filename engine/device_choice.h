// Which device an engine's ranks run on: EngineOptions::device ("cpu", "cpu:N", "cuda", "cuda:N") made a
// Device this build and machine can run, or an error saying what is missing.
//
// "cuda" without an index is the rank's own GPU: its index among its node's ranks under a
// launcher (LocalRankFromEnv), else GPU 0 — one rank per GPU.
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "executor/device.h"

namespace pdist::engine {

absl::StatusOr<exec::Device> ChooseDevice(const std::string& name);

// The rank's index among its node's ranks, as its launcher says it: LOCAL_RANK (pdist-run,
// torchrun), OMPI_COMM_WORLD_LOCAL_RANK (Open MPI's mpirun), MPI_LOCALRANKID (MPICH, Intel MPI)
// or SLURM_LOCALID (srun; after the MPI ones, which an mpirun inside an allocation sets beside
// the batch step's SLURM_LOCALID), the first one set — the launchers whose ranks the
// world accepts (engine/launched_rank.h). Nullopt when none is; an error naming a value that is not an
// index.
absl::StatusOr<std::optional<int>> LocalRankFromEnv();

}  // namespace pdist::engine
