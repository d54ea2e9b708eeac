// CommGroups: the sub-communicators of every mesh-dim group, created in the same order on all
// ranks.
#include "executor/comm/comm_groups.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/op_def.h"
#include "ir/status.h"

namespace pdist::exec::comm {

absl::StatusOr<std::shared_ptr<CommGroups>> CommGroups::Create(std::shared_ptr<Communicator> world,
                                                               const std::vector<ir::ProcessMesh>& meshes,
                                                               std::vector<ChannelKey> channels) {
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
  // Made by the two ends alone, each blocking until the other joins (Gloo, NCCL): in the order of
  // the unordered pair, then the direction and lane, every rank's sequence is a subsequence of
  // one global order, so the lowest pair anyone waits for has both its ends at it.
  auto order = [](const ChannelKey& c) {
    return std::make_tuple(std::min(c.src, c.dst), std::max(c.src, c.dst), c.src, c.lane);
  };
  std::sort(channels.begin(), channels.end(), [&](const auto& a, const auto& b) { return order(a) < order(b); });
  channels.erase(std::unique(channels.begin(), channels.end()), channels.end());
  for (const ChannelKey& key : channels) {
    const auto [src, dst, lane] = key;
    if (src != rank && dst != rank) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " was asked to join the channel ", ToString(key),
                                                     ", which it is not an end of"));
    }
    PDIST_ASSIGN_OR_RETURN(std::shared_ptr<Communicator> channel,
                           world->Channel(static_cast<int>(src), static_cast<int>(dst), lane));
    // One message now, in the same order: NCCL connects a pair at its first send and receive,
    // and a rank's one host thread may wait there; here both ends are at it by construction.
    Tensor hello = Tensor::Zeros({{1}, ir::DataType::kInt64});
    PDIST_RETURN_IF_ERROR(WithContext(src == rank ? channel->Send(hello, 1) : channel->Recv(hello, 0),
                                      absl::StrCat("opening channel ", ToString(key))));
    groups->channels_[key] = std::move(channel);
  }
  return groups;
}

absl::StatusOr<Communicator*> CommGroups::Channel(int64_t src, int64_t dst, int64_t lane) const {
  auto it = channels_.find({src, dst, lane});
  if (it == channels_.end()) {
    return absl::NotFoundError(absl::StrCat("rank ", rank(), " has no channel for messages from rank ", src,
                                            " to rank ", dst, lane > 0 ? absl::StrCat(" on lane ", lane) : "",
                                            " (CommGroups::Create makes the pairs it is given)"));
  }
  return it->second.get();
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

std::string ToString(const ChannelKey& key) {
  return absl::StrCat(key.src, " > ", key.dst, key.lane > 0 ? absl::StrCat(" (lane ", key.lane, ")") : "");
}

std::optional<ChannelKey> ChannelOf(const ir::Operation& op, int64_t rank) {
  const ir::OpDef* def = ir::OpRegistry::Global().Find(op.type());
  if (def == nullptr || def->point_to_point == ir::PointToPoint::kNone) return std::nullopt;
  absl::StatusOr<int64_t> peer = ir::GetInt(op.attrs(), "peer");
  if (!peer.ok()) return std::nullopt;  // the verifier refuses such an op; its kernel names the attribute
  const int64_t lane = ir::GetInt(op.attrs(), "lane").value_or(0);
  return def->point_to_point == ir::PointToPoint::kSend ? ChannelKey{rank, *peer, lane} : ChannelKey{*peer, rank, lane};
}

std::vector<ChannelKey> ChannelsOf(const ir::Program& local, int64_t rank) {
  std::vector<ChannelKey> channels;
  for (const auto& op : local.block().ops()) {
    if (std::optional<ChannelKey> channel = ChannelOf(*op, rank)) channels.push_back(*channel);
  }
  return channels;
}

absl::Status CommGroups::AsyncError() const {
  PDIST_RETURN_IF_ERROR(world_->AsyncError());
  for (const auto& [ranks, comm] : groups_) PDIST_RETURN_IF_ERROR(comm->AsyncError());
  for (const auto& [key, comm] : channels_) PDIST_RETURN_IF_ERROR(comm->AsyncError());
  return absl::OkStatus();
}

}  // namespace pdist::exec::comm
