// The world communicator of a process-per-rank job, from the launcher's environment (RANK,
// WORLD_SIZE, MASTER_ADDR/MASTER_PORT or PDIST_RENDEZVOUS_DIR). Unimplemented in a build
// without Gloo, saying how to get it.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "executor/comm/communicator.h"

namespace pdist::engine {

absl::StatusOr<std::shared_ptr<exec::comm::Communicator>> CreateGlooWorld(const exec::comm::CommConfig& config);

}  // namespace pdist::engine
