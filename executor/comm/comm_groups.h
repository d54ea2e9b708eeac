// CommGroups: one rank's communicators for every group a partitioned program names.
//
// A local program's collective ops name their group by its global ranks, in group order
// (`ranks = [0, 2]`: the dp column of a [2,2] mesh). Creating a sub-communicator is itself a
// collective over the world, so every rank must create the same groups in the same order;
// CommGroups does that from the meshes of the global program — for each mesh and each
// non-empty subset of its dims, one Split of the world — so that no rank ever waits for a
// group its peers did not create.
//
//   PDIST_ASSIGN_OR_RETURN(auto groups, CommGroups::Create(world, {mesh}));
//   PDIST_ASSIGN_OR_RETURN(Communicator * mp, groups->Get({2, 3}));
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "executor/comm/communicator.h"
#include "ir/dist/process_mesh.h"

namespace pdist::exec::comm {

class CommGroups {
 public:
  // Collective over `world`: every rank calls it with the same meshes, in the same order.
  static absl::StatusOr<std::shared_ptr<CommGroups>> Create(std::shared_ptr<Communicator> world,
                                                            const std::vector<ir::ProcessMesh>& meshes);

  // The communicator whose members are `ranks` (global ranks, in that order). NotFound naming
  // the ranks when this rank created no such group (it is not a member, or no mesh has it).
  absl::StatusOr<Communicator*> Get(const std::vector<int64_t>& ranks) const;

  Communicator& world() const { return *world_; }
  int rank() const { return world_->rank(); }
  // The first error any of this rank's communicators recorded (Communicator::AsyncError): for a
  // device backend, a collective that failed after it was enqueued. OK while all are healthy.
  absl::Status AsyncError() const;

 private:
  explicit CommGroups(std::shared_ptr<Communicator> world) : world_(std::move(world)) {}

  std::shared_ptr<Communicator> world_;
  std::map<std::vector<int64_t>, std::shared_ptr<Communicator>> groups_;
};

}  // namespace pdist::exec::comm
