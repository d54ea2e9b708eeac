// CreateNcclWorld: the NCCL communicator from the launcher's environment, when built.
#include "engine/nccl_world.h"

#include "ir/status.h"

#if defined(PDIST_HAVE_CUDA) && defined(PDIST_HAVE_GLOO)
#include "executor/comm/gloo/gloo_communicator.h"
#include "executor/cuda/nccl_communicator.h"
#endif

namespace pdist::engine {

absl::StatusOr<std::shared_ptr<exec::comm::Communicator>> CreateNcclWorld(const exec::comm::CommConfig& config,
                                                                          const exec::Device& gpu) {
#if defined(PDIST_HAVE_CUDA) && defined(PDIST_HAVE_GLOO)
  PDIST_ASSIGN_OR_RETURN(exec::comm::LaunchedWorld world, exec::comm::LaunchedWorldFromEnv("nccl"));
  PDIST_ASSIGN_OR_RETURN(std::shared_ptr<exec::comm::KeyValueStore> store,
                         exec::comm::OpenKeyValueStore(world.rendezvous, world.rank, config.timeout));
  PDIST_ASSIGN_OR_RETURN(auto comm, exec::cuda::NcclCommunicator::Create(std::move(store), world.rank, world.size,
                                                                         gpu, config));
  return std::shared_ptr<exec::comm::Communicator>(std::move(comm));
#else
  (void)config;
  (void)gpu;
  return absl::UnimplementedError(
      "this build has no NCCL backend: it needs the CUDA backend (-DPDIST_WITH_CUDA=ON, with NCCL) and Gloo's "
      "rendezvous store (libgloo-dev); or use backend gloo or inproc on the CPU");
#endif
}

}  // namespace pdist::engine
