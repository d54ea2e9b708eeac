// CreateNcclWorld: the NCCL communicator from the launcher's environment, when built.
#include "engine/nccl_world.h"

#include "ir/status.h"

#if defined(PDIST_HAVE_CUDA) && defined(PDIST_HAVE_GLOO)
#include <atomic>

#include "absl/strings/str_cat.h"
#include "executor/comm/gloo/gloo_communicator.h"
#include "executor/cuda/nccl_communicator.h"
#endif

namespace pdist::engine {

#if defined(PDIST_HAVE_CUDA) && defined(PDIST_HAVE_GLOO)
namespace {

// The job's store with this process's n-th NCCL world's keys under "nccl-world-<n>/": a second
// engine of the same processes (after a failure: "create a new engine and load the last
// checkpoint") would otherwise read the first world's NCCL id, still in a --rendezvous-dir, and
// join a bootstrap that is gone. Every rank's process makes its worlds in the same order.
class WorldStore final : public exec::comm::KeyValueStore {
 public:
  WorldStore(std::shared_ptr<exec::comm::KeyValueStore> store, int generation)
      : store_(std::move(store)), prefix_(absl::StrCat("nccl-world-", generation, "/")) {}
  absl::Status Set(const std::string& key, const std::string& value) override {
    return store_->Set(prefix_ + key, value);
  }
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override {
    return store_->Get(prefix_ + key, timeout);
  }
  absl::StatusOr<std::optional<std::string>> TryGet(const std::string& key) override {
    return store_->TryGet(prefix_ + key);
  }

 private:
  std::shared_ptr<exec::comm::KeyValueStore> store_;
  std::string prefix_;
};

}  // namespace
#endif

absl::StatusOr<std::shared_ptr<exec::comm::Communicator>> CreateNcclWorld(const exec::comm::CommConfig& config,
                                                                          const exec::Device& gpu) {
#if defined(PDIST_HAVE_CUDA) && defined(PDIST_HAVE_GLOO)
  // Counted before anything can fail, so that every process numbers its attempts alike.
  static std::atomic<int> worlds{0};
  const int generation = worlds++;
  PDIST_ASSIGN_OR_RETURN(exec::comm::LaunchedWorld world, exec::comm::LaunchedWorldFromEnv("nccl"));
  PDIST_ASSIGN_OR_RETURN(std::shared_ptr<exec::comm::KeyValueStore> store,
                         exec::comm::OpenKeyValueStore(world.rendezvous, world.rank, config.timeout));
  auto numbered = std::make_shared<WorldStore>(std::move(store), generation);
  PDIST_ASSIGN_OR_RETURN(auto comm, exec::cuda::NcclCommunicator::Create(std::move(numbered), world.rank, world.size,
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
