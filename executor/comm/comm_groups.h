// CommGroups: one rank's communicators for every group a partitioned program names.
//
// A local program's collective ops name their group by its global ranks, in group order
// (`ranks = [0, 2]`: the dp column of a [2,2] mesh). Creating a sub-communicator is itself a
// collective over the world, so every rank must create the same groups in the same order;
// CommGroups does that from the meshes of the global program — for each mesh and each
// non-empty subset of its dims, one Split of the world — so that no rank ever waits for a
// group its peers did not create.
//
// Point-to-point messages (a pipeline stage's sends and receives) go over channels, one
// two-rank communicator per direction and lane (Communicator::Channel); CommGroups makes the
// ones this rank takes part in, sorted by pair so that the two ends make theirs in one order.
//
//   PDIST_ASSIGN_OR_RETURN(auto groups, CommGroups::Create(world, {mesh}, {{0, 2}, {2, 0}}));
//   PDIST_ASSIGN_OR_RETURN(Communicator * mp, groups->Get({2, 3}));
//   PDIST_ASSIGN_OR_RETURN(Communicator * to_next, groups->Channel(0, 2));  // rank 0 sends as 0, rank 2 receives as 1
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "executor/comm/communicator.h"
#include "ir/dist/process_mesh.h"
#include "ir/program.h"

namespace pdist::exec::comm {

// One direction between two world ranks; lane > 0 separates messages that must not queue
// behind the lane-0 ones (c_send's `lane`).
struct ChannelKey {
  int64_t src = 0;
  int64_t dst = 0;
  int64_t lane = 0;
  friend auto operator<=>(const ChannelKey&, const ChannelKey&) = default;
};
std::string ToString(const ChannelKey& key);  // "0 > 3", "0 > 3 (lane 8)"

class CommGroups {
 public:
  // Collective over `world`: every rank calls it with the same meshes, in the same order.
  // `channels`: the channels of this rank's sends and receives (world ranks; any order,
  // repeats allowed), each made with its other end.
  static absl::StatusOr<std::shared_ptr<CommGroups>> Create(std::shared_ptr<Communicator> world,
                                                            const std::vector<ir::ProcessMesh>& meshes,
                                                            std::vector<ChannelKey> channels = {});

  // The communicator whose members are `ranks` (global ranks, in that order). NotFound naming
  // the ranks when this rank created no such group (it is not a member, or no mesh has it).
  absl::StatusOr<Communicator*> Get(const std::vector<int64_t>& ranks) const;

  // The channel carrying world rank `src`'s messages to `dst` on `lane`. NotFound naming the
  // pair when Create was not given it.
  absl::StatusOr<Communicator*> Channel(int64_t src, int64_t dst, int64_t lane = 0) const;

  Communicator& world() const { return *world_; }
  int rank() const { return world_->rank(); }
  // The first error any of this rank's communicators recorded (Communicator::AsyncError): for a
  // device backend, a collective that failed after it was enqueued. OK while all are healthy.
  absl::Status AsyncError() const;

 private:
  explicit CommGroups(std::shared_ptr<Communicator> world) : world_(std::move(world)) {}

  std::shared_ptr<Communicator> world_;
  std::map<std::vector<int64_t>, std::shared_ptr<Communicator>> groups_;
  std::map<ChannelKey, std::shared_ptr<Communicator>> channels_;
};

// The channel of a point-to-point op (ir::OpDef::point_to_point) run by world rank `rank`;
// nullopt for any other op.
std::optional<ChannelKey> ChannelOf(const ir::Operation& op, int64_t rank);
// The channels of every point-to-point op of `local`: what CommGroups::Create needs for them.
std::vector<ChannelKey> ChannelsOf(const ir::Program& local, int64_t rank);

}  // namespace pdist::exec::comm
