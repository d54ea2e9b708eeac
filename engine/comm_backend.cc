// The communication backends: inproc and inproc-rendezvous (ranks as threads), gloo and nccl (a
// process per rank).
#include "engine/comm_backend.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/gloo_world.h"
#include "engine/nccl_world.h"
#include "executor/comm/inproc/inproc_communicator.h"
#include "ir/status.h"

namespace pdist::engine {
namespace {

using Worlds = std::vector<std::shared_ptr<exec::comm::Communicator>>;

absl::StatusOr<Worlds> InprocWorldWith(const exec::comm::InprocOptions& options, int64_t world_size,
                                       const exec::comm::CommConfig& config) {
  auto world = std::make_shared<exec::comm::InprocWorld>(static_cast<int>(world_size), options);
  Worlds comms;
  for (int64_t r = 0; r < world_size; ++r) {
    PDIST_ASSIGN_OR_RETURN(auto comm, exec::comm::CreateInprocCommunicator(world, static_cast<int>(r), config));
    comms.push_back(std::move(comm));
  }
  return comms;
}

absl::StatusOr<Worlds> InprocWorld(int64_t world_size, const exec::comm::CommConfig& config,
                                   const exec::Device& /*host*/) {
  return InprocWorldWith({}, world_size, config);
}

absl::StatusOr<Worlds> InprocRendezvousWorld(int64_t world_size, const exec::comm::CommConfig& config,
                                             const exec::Device& /*host*/) {
  return InprocWorldWith({.rendezvous_sends = true}, world_size, config);
}

// This process's rank of a launched job, checked against the strategy's world.
absl::StatusOr<Worlds> LaunchedWorld(absl::StatusOr<std::shared_ptr<exec::comm::Communicator>> comm, int64_t world_size) {
  if (!comm.ok()) return comm.status();
  if ((*comm)->size() != world_size) {
    return absl::InvalidArgumentError(absl::StrCat("WORLD_SIZE is ", (*comm)->size(), " but the strategy needs ",
                                                   world_size, " ranks (dp_degree × mp_degree × pp_degree)"));
  }
  return Worlds{*std::move(comm)};
}

absl::StatusOr<Worlds> GlooWorld(int64_t world_size, const exec::comm::CommConfig& config,
                                 const exec::Device& /*host*/) {
  return LaunchedWorld(CreateGlooWorld(config), world_size);
}

absl::StatusOr<Worlds> NcclWorld(int64_t world_size, const exec::comm::CommConfig& config,
                                 const exec::Device& gpu) {
  return LaunchedWorld(CreateNcclWorld(config, gpu), world_size);
}

}  // namespace

const std::vector<CommBackend>& CommBackends() {
  static const std::vector<CommBackend>* backends = new std::vector<CommBackend>{
      {.name = "inproc", .summary = "ranks are threads of this process", .create_world = InprocWorld},
      {.name = "inproc-rendezvous",
       .summary = "ranks are threads; each send waits for its receive, matched in issue order as NCCL's: "
                  "checks on the CPU that a job runs over NCCL",
       .buffered_sends = false,
       .create_world = InprocRendezvousWorld},
      {.name = "gloo",
       .summary = "this process is one rank; run under pdist-run",
       .process_per_rank = true,
       .launcher_provides = "RANK, WORLD_SIZE and MASTER_ADDR/MASTER_PORT or PDIST_RENDEZVOUS_DIR",
       .create_world = GlooWorld},
      {.name = "nccl",
       .summary = "this process is one rank on its GPU (LOCAL_RANK); run under pdist-run with --device cuda",
       .process_per_rank = true,
       .launcher_provides = "RANK, WORLD_SIZE, LOCAL_RANK and MASTER_ADDR/MASTER_PORT or PDIST_RENDEZVOUS_DIR",
       .device_memory = true,
       .buffered_sends = false,
       .create_world = NcclWorld},
  };
  return *backends;
}

absl::StatusOr<const CommBackend*> FindCommBackend(std::string_view name) {
  std::vector<std::string> names;
  for (const CommBackend& b : CommBackends()) {
    if (name == b.name) return &b;
    names.push_back(b.name);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("backend '", std::string(name), "': expected ", absl::StrJoin(names, " or ")));
}

std::string CommBackendHelp() {
  std::vector<std::string> parts;
  for (const CommBackend& b : CommBackends()) parts.push_back(absl::StrCat(b.name, " (", b.summary, ")"));
  return absl::StrJoin(parts, " | ");
}

}  // namespace pdist::engine
