// The world communicator of a process-per-rank job on GPUs: NCCL, one rank per GPU (`gpu`, the
// engine's device: LOCAL_RANK's for "cuda", engine/device_choice.h), meeting through the
// launcher's rendezvous store (RANK, WORLD_SIZE, MASTER_ADDR/MASTER_PORT or PDIST_RENDEZVOUS_DIR).
// Unimplemented, saying what to build, without the CUDA backend or Gloo's store.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "executor/comm/communicator.h"
#include "executor/device.h"

namespace pdist::engine {

absl::StatusOr<std::shared_ptr<exec::comm::Communicator>> CreateNcclWorld(const exec::comm::CommConfig& config,
                                                                          const exec::Device& gpu);

}  // namespace pdist::engine
