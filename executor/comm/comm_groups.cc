// CommGroups: the sub-communicators of every mesh-dim group, created in the same order on all
// ranks.
#include "executor/comm/comm_groups.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/status.h"

namespace pdist::exec::comm {

absl::StatusOr<std::shared_ptr<CommGroups>> CommGroups::Create(std::shared_ptr<Communicator> world,
                                                               const std::vector<ir::ProcessMesh>& meshes) {
  auto groups = std::shared_ptr<CommGroups>(new CommGroups(world));
  const int64_t rank = world->rank();
  for (const ir::ProcessMesh& mesh : meshes) {
    for (int64_t id : mesh.process_ids()) {
      if (id >= world->size()) {
        return absl::InvalidArgumentError(absl::StrCat("mesh ", mesh.ToString(), " names process ", id,
                                                       " but the world has ", world->size(), " ranks"));
      }
    }
    for (int64_t mask = 1; mask < (int64_t{1} << mesh.ndim()); ++mask) {
      std::vector<int64_t> dims;
      for (int64_t d = 0; d < mesh.ndim(); ++d) {
        if (mask & (int64_t{1} << d)) dims.push_back(d);
      }
      const std::vector<int64_t> members = mesh.GroupAlong(dims, rank);
      // Color: the group's first member identifies it; key: the position inside it.
      int color = -1, key = 0;
      if (!members.empty()) {
        color = static_cast<int>(members.front());
        key = static_cast<int>(std::find(members.begin(), members.end(), rank) - members.begin());
      }
      PDIST_ASSIGN_OR_RETURN(std::shared_ptr<Communicator> comm, world->Split(color, key));
      if (comm != nullptr) groups->groups_[members] = std::move(comm);
    }
  }
  return groups;
}

absl::StatusOr<Communicator*> CommGroups::Get(const std::vector<int64_t>& ranks) const {
  if (ranks.size() == static_cast<size_t>(world_->size())) {
    bool identity = true;
    for (size_t i = 0; i < ranks.size(); ++i) identity = identity && ranks[i] == static_cast<int64_t>(i);
    if (identity) return world_.get();
  }
  auto it = groups_.find(ranks);
  if (it == groups_.end()) {
    return absl::NotFoundError(absl::StrCat("rank ", rank(), " has no communicator for the group [",
                                            absl::StrJoin(ranks, ","), "]"));
  }
  return it->second.get();
}

absl::Status CommGroups::AsyncError() const {
  PDIST_RETURN_IF_ERROR(world_->AsyncError());
  for (const auto& [ranks, comm] : groups_) PDIST_RETURN_IF_ERROR(comm->AsyncError());
  return absl::OkStatus();
}

}  // namespace pdist::exec::comm
