// Communication backends as the engine and the tools see them: how a job's world is made, and
// whether a process runs every rank or one. Code asks what a backend does, never its name.
//
//   PDIST_ASSIGN_OR_RETURN(const CommBackend* backend, FindCommBackend("gloo"));
//   backend->process_per_rank   // true: pdist-run starts the other ranks
//   PDIST_ASSIGN_OR_RETURN(auto comms, backend->create_world(/*world_size=*/4, config, device));
//
// A backend is one entry in comm_backend.cc with its world factory; the engine, pdist-train's
// --backend and pdist-run's validation follow from the entry.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "executor/comm/communicator.h"
#include "executor/device.h"

namespace pdist::engine {

struct CommBackend {
  const char* name;     // --backend NAME, EngineOptions::backend
  const char* summary;  // for --help
  // This process is one rank of the job and a launcher (pdist-run) starts the others; otherwise
  // this process runs every rank, as threads.
  bool process_per_rank = false;
  // What the launcher must set for a rank to find its world ("" when nothing).
  const char* launcher_provides = "";
  // The communicators move device memory (NCCL): the ranks run on GPUs. Otherwise they move
  // host memory, and the ranks' tensors must be on the host (cpu, cpu:N).
  bool device_memory = false;
  // A send returns once its data is copied out (inproc, gloo). Otherwise it waits for the
  // peer's receive, and a pair's messages meet in issue order whatever their tags (NCCL): the
  // executor must run point-to-point ops on their communication streams (one per direction).
  bool buffered_sends = true;
  // The world communicators of the ranks this process runs, for a job of `world_size` ranks
  // whose tensors are on `device`. InvalidArgument when the launcher's world does not have
  // `world_size` ranks.
  std::function<absl::StatusOr<std::vector<std::shared_ptr<exec::comm::Communicator>>>(
      int64_t world_size, const exec::comm::CommConfig& config, const exec::Device& device)>
      create_world;
};

// Every backend this build knows (gloo is listed even without Gloo: its factory says how to get
// it), in a fixed order.
const std::vector<CommBackend>& CommBackends();

// InvalidArgument naming `name` and listing the known backends.
absl::StatusOr<const CommBackend*> FindCommBackend(std::string_view name);

// "inproc (ranks are threads of this process) | gloo (this process is one rank; ...)".
std::string CommBackendHelp();

}  // namespace pdist::engine
