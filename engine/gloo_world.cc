// CreateGlooWorld: the Gloo backend when built, an explanation otherwise.
#include "engine/gloo_world.h"

#ifdef PDIST_HAVE_GLOO
#include "executor/comm/gloo/gloo_communicator.h"
#endif

namespace pdist::engine {

absl::StatusOr<std::shared_ptr<exec::comm::Communicator>> CreateGlooWorld(const exec::comm::CommConfig& config) {
#ifdef PDIST_HAVE_GLOO
  return exec::comm::CreateGlooCommunicatorFromEnv(config);
#else
  (void)config;
  return absl::UnimplementedError(
      "this build has no Gloo backend: install libgloo-dev and reconfigure (or use backend inproc)");
#endif
}

}  // namespace pdist::engine
