// Communicator: argument checks, sequence numbers, sticky errors and Split, shared by backends.
#include "executor/comm/communicator.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "executor/dtype_dispatch.h"
#include "ir/status.h"

namespace pdist::exec::comm {

const char* ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kAvg: return "avg";
    case ReduceOp::kMax: return "max";
  }
  return "?";
}

const char* CollectiveName(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce: return "all_reduce";
    case CollectiveKind::kAllGather: return "all_gather";
    case CollectiveKind::kReduceScatter: return "reduce_scatter";
    case CollectiveKind::kAllToAll: return "all_to_all";
    case CollectiveKind::kBroadcast: return "broadcast";
    case CollectiveKind::kSend: return "send";
    case CollectiveKind::kRecv: return "recv";
    case CollectiveKind::kBarrier: return "barrier";
  }
  return "?";
}

int WorldRankOf(const CommConfig& config, int r) {
  return r >= 0 && r < static_cast<int>(config.world_ranks.size()) ? config.world_ranks[static_cast<size_t>(r)] : r;
}

std::string WorldRanksOf(const CommConfig& config, const std::vector<int>& ranks) {
  std::vector<int> world;
  for (int r : ranks) world.push_back(WorldRankOf(config, r));
  return absl::StrJoin(world, ", ");
}

int Fingerprint::WorldRank(int r) const {
  if (world_ranks == nullptr || r < 0 || r >= static_cast<int>(world_ranks->size())) return r;
  return (*world_ranks)[static_cast<size_t>(r)];
}

namespace {
std::string WorldRanksOf(const Fingerprint& fp, const std::vector<int>& ranks) {
  std::vector<int> world;
  for (int r : ranks) world.push_back(fp.WorldRank(r));
  return absl::StrJoin(world, ", ");
}
}  // namespace

std::string Fingerprint::ToString() const {
  std::string s = CollectiveName(kind);
  if (kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kReduceScatter) {
    absl::StrAppend(&s, "(", ReduceOpName(reduce), ")");
  }
  if (kind == CollectiveKind::kBroadcast) absl::StrAppend(&s, "(root=", WorldRank(root), ")");
  if (kind == CollectiveKind::kSend || kind == CollectiveKind::kRecv) {
    absl::StrAppend(&s, "(from=", WorldRank(root), tag != 0 ? absl::StrCat(", tag=", tag) : "", ")");
  }
  absl::StrAppend(&s, " ", ir::DataTypeName(dtype), " x", count, " in ", group, "#", seq);
  return s;
}

absl::Status FingerprintMismatch(const Fingerprint& mine, int my_rank, const Fingerprint& theirs,
                                 int their_rank) {
  Fingerprint other = theirs;  // decoded from a peer: numbered as this group is
  other.world_ranks = mine.world_ranks;
  return absl::InternalError(absl::StrCat("collective mismatch in group '", mine.group, "': rank ",
                                          mine.WorldRank(my_rank), " called ", mine.ToString(), " but rank ",
                                          mine.WorldRank(their_rank), " called ", other.ToString()));
}

absl::Status MissingRanks(const Fingerprint& fp, absl::Duration timeout,
                          const std::vector<int>& missing, const std::string& detail) {
  std::string msg = absl::StrCat("timeout after ", absl::FormatDuration(timeout), " in group '",
                                 fp.group, "' waiting for ", fp.ToString(), " (seq ", fp.seq,
                                 "): ranks that did not arrive: ",
                                 missing.empty() ? "unknown" : WorldRanksOf(fp, missing));
  if (!detail.empty()) absl::StrAppend(&msg, " (", detail, ")");
  return absl::DeadlineExceededError(msg);
}

absl::Status LostRanks(const Fingerprint& fp, const std::vector<int>& lost, const std::string& detail) {
  std::string msg = absl::StrCat("lost the connection in group '", fp.group, "' during ", fp.ToString(), " (seq ",
                                 fp.seq, "): ranks that closed it (exited, crashed, or stopped after an error of their own: see their output): ", WorldRanksOf(fp, lost));
  if (!detail.empty()) absl::StrAppend(&msg, " (", detail, ")");
  return absl::UnavailableError(msg);
}

absl::Status CheckReducible(ir::DataType dtype, ReduceOp op) {
  switch (dtype) {
    case ir::DataType::kFloat32:
    case ir::DataType::kFloat64:
      return absl::OkStatus();
    case ir::DataType::kInt32:
    case ir::DataType::kInt64:
      if (op != ReduceOp::kAvg) return absl::OkStatus();
      break;
    default:
      break;
  }
  return absl::UnimplementedError(absl::StrCat("reduction ", ReduceOpName(op), " is not defined for ",
                                               ir::DataTypeName(dtype),
                                               " (f32, f64; i32, i64 for sum and max)"));
}

namespace {

template <typename T>
void ReduceTyped(ReduceOp op, const std::vector<const void*>& inputs, void* out, int64_t begin,
                 int64_t end) {
  T* dst = static_cast<T*>(out);
  // Rank order, element by element: the same additions in the same order on every rank and
  // every run, so the result is bitwise reproducible.
  std::memcpy(dst + begin, static_cast<const T*>(inputs[0]) + begin, (end - begin) * sizeof(T));
  for (size_t r = 1; r < inputs.size(); ++r) {
    const T* src = static_cast<const T*>(inputs[r]);
    if (op == ReduceOp::kMax) {
      for (int64_t i = begin; i < end; ++i) dst[i] = std::max(dst[i], src[i]);
    } else {
      for (int64_t i = begin; i < end; ++i) dst[i] += src[i];
    }
  }
  if (op == ReduceOp::kAvg) {
    const T n = static_cast<T>(inputs.size());
    for (int64_t i = begin; i < end; ++i) dst[i] /= n;
  }
}

}  // namespace

absl::Status ReduceRange(ir::DataType dtype, ReduceOp op, const std::vector<const void*>& inputs,
                         void* out, int64_t begin, int64_t end) {
  PDIST_RETURN_IF_ERROR(CheckReducible(dtype, op));
  if (begin >= end) return absl::OkStatus();
  PDIST_DISPATCH_ALL(dtype, T, {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> ||
                  std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>) {
      ReduceTyped<T>(op, inputs, out, begin, end);
    }
  });
  return absl::OkStatus();
}

// ---- Collectives: check, number, run, remember the first failure ----------------------------

absl::Status Communicator::Start(CollectiveKind kind, ReduceOp reduce, const Tensor* in,
                                 Tensor* out, int root_or_peer, int64_t tag, Stream* stream,
                                 std::optional<absl::Duration> timeout) {
  const std::string what = absl::StrCat(CollectiveName(kind), " in group '", name(), "' (rank ", WorldRank(rank_),
                                        config_.world_ranks.empty() ? "" : absl::StrCat(", its ", rank_), " of ",
                                        size_, ")");
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", why));
  };
  const Tensor* data = in != nullptr ? in : out;
  if (data != nullptr) {
    if (!data->defined()) return bad("tensor is not allocated");
    if (in != nullptr && out != nullptr) {
      if (!out->defined()) return bad("output tensor is not allocated");
      if (in->dtype() != out->dtype()) {
        return bad(absl::StrCat("input is ", in->type().ToString(), " but output is ",
                                out->type().ToString()));
      }
      const int64_t ni = in->num_elements(), no = out->num_elements();
      const bool ok = kind == CollectiveKind::kAllGather       ? no == ni * size_
                      : kind == CollectiveKind::kReduceScatter ? ni == no * size_
                                                               : ni == no;
      if (!ok) {
        return bad(absl::StrCat("input ", in->type().ToString(), " and output ",
                                out->type().ToString(), " do not fit ", size_, " ranks"));
      }
      if (kind == CollectiveKind::kAllToAll && ni % size_ != 0) {
        return bad(absl::StrCat(ni, " elements do not split into ", size_, " equal pieces"));
      }
    }
    if (kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kReduceScatter) {
      PDIST_RETURN_IF_ERROR(WithContext(CheckReduction(data->dtype(), reduce), what));
    }
  }
  const bool p2p = kind == CollectiveKind::kSend || kind == CollectiveKind::kRecv;
  if ((p2p || kind == CollectiveKind::kBroadcast) && (root_or_peer < 0 || root_or_peer >= size_)) {
    return bad(absl::StrCat("rank ", root_or_peer, " is outside the group of ", size_));
  }
  if (p2p && root_or_peer == rank_) return bad("a rank cannot send to or receive from itself");

  Call call;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!error_.ok()) {
      return absl::Status(error_.code(), absl::StrCat(what, ": communicator unusable after an earlier error: ",
                                                      error_.message()));
    }
    Fingerprint& fp = call.fp;
    fp.kind = kind;
    fp.reduce = reduce;
    fp.group = name();
    fp.world_ranks = world_ranks_;
    if (data != nullptr) {
      fp.dtype = data->dtype();
      fp.count = data->num_elements();
    }
    if (p2p) {
      const int src = kind == CollectiveKind::kSend ? rank_ : root_or_peer;
      const int dst = kind == CollectiveKind::kSend ? root_or_peer : rank_;
      fp.root = src;
      fp.tag = tag;
      fp.seq = p2p_seq_[{src, dst, tag}]++;
      call.peer = root_or_peer;
    } else {
      fp.root = kind == CollectiveKind::kBroadcast ? root_or_peer : -1;
      fp.seq = seq_++;
    }
  }
  call.in = in;
  call.out = out;
  call.deadline = absl::Now() + timeout.value_or(config_.timeout);
  call.stream = stream;
  absl::Status status = Run(call);
  if (!status.ok()) RecordError(status);
  return status;
}

void Communicator::RecordError(absl::Status status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (error_.ok()) error_ = std::move(status);
}

absl::Status Communicator::AllReduce(const Tensor& in, Tensor& out, ReduceOp op, Stream* stream) {
  return Start(CollectiveKind::kAllReduce, op, &in, &out, -1, 0, stream);
}
absl::Status Communicator::AllGather(const Tensor& in, Tensor& out, Stream* stream) {
  return Start(CollectiveKind::kAllGather, ReduceOp::kSum, &in, &out, -1, 0, stream);
}
absl::Status Communicator::ReduceScatter(const Tensor& in, Tensor& out, ReduceOp op, Stream* stream) {
  return Start(CollectiveKind::kReduceScatter, op, &in, &out, -1, 0, stream);
}
absl::Status Communicator::AllToAll(const Tensor& in, Tensor& out, Stream* stream) {
  return Start(CollectiveKind::kAllToAll, ReduceOp::kSum, &in, &out, -1, 0, stream);
}
absl::Status Communicator::Broadcast(Tensor& buffer, int root, Stream* stream) {
  return Start(CollectiveKind::kBroadcast, ReduceOp::kSum, &buffer, &buffer, root, 0, stream);
}
absl::Status Communicator::Send(const Tensor& tensor, int peer, int64_t tag, Stream* stream) {
  return Start(CollectiveKind::kSend, ReduceOp::kSum, &tensor, nullptr, peer, tag, stream);
}
absl::Status Communicator::Recv(Tensor& tensor, int peer, int64_t tag, Stream* stream) {
  return Start(CollectiveKind::kRecv, ReduceOp::kSum, nullptr, &tensor, peer, tag, stream);
}
absl::Status Communicator::Barrier() {
  return Start(CollectiveKind::kBarrier, ReduceOp::kSum, nullptr, nullptr, -1);
}
absl::Status Communicator::Barrier(absl::Duration timeout) {
  return Start(CollectiveKind::kBarrier, ReduceOp::kSum, nullptr, nullptr, -1, 0, nullptr, timeout);
}

void Communicator::Abort() {
  std::vector<std::shared_ptr<Communicator>> subgroups;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (error_.ok()) error_ = absl::AbortedError(absl::StrCat("communicator '", name(), "' was aborted"));
    for (const auto& [members, comm] : subgroups_) subgroups.push_back(comm);
    for (const auto& [pair, comm] : channels_) subgroups.push_back(comm);
  }
  AbortBackend();
  // A rank blocked in a sub-group (a tensor-parallel all-reduce) must wake too.
  for (const auto& comm : subgroups) comm->Abort();
}

absl::Status Communicator::AsyncError() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

absl::StatusOr<std::shared_ptr<Communicator>> Communicator::Split(int color, int key) {
  // Everyone learns everyone's (color, key) through an all_gather on this communicator, so a
  // Split is numbered and fingerprinted like any collective.
  Tensor mine = TensorFromDoubles({{2}, ir::DataType::kInt64}, {double(color), double(key)});
  Tensor all = Tensor::Zeros({{2 * size_}, ir::DataType::kInt64});
  PDIST_RETURN_IF_ERROR(WithContext(AllGather(mine, all), absl::StrCat("Split(", color, ", ", key, ")")));
  const int64_t* ck = all.data<int64_t>();
  if (color < 0) return std::shared_ptr<Communicator>();  // joins no group
  std::vector<int> members;
  for (int r = 0; r < size_; ++r) {
    if (ck[2 * r] == color) members.push_back(r);
  }
  std::stable_sort(members.begin(), members.end(),
                   [&](int a, int b) { return ck[2 * a + 1] < ck[2 * b + 1]; });
  std::lock_guard<std::mutex> lock(mu_);
  auto it = subgroups_.find(members);
  if (it != subgroups_.end()) return it->second;
  CommConfig sub = config_;
  sub.name = absl::StrCat(name(), "/{", absl::StrJoin(members, ","), "}");
  sub.world_ranks.clear();
  for (int m : members) sub.world_ranks.push_back(WorldRank(m));
  PDIST_ASSIGN_OR_RETURN(std::shared_ptr<Communicator> comm, CreateSubgroup(members, sub));
  subgroups_[members] = comm;
  return comm;
}

int Communicator::WorldRank(int r) const { return WorldRankOf(config_, r); }

absl::StatusOr<std::shared_ptr<Communicator>> Communicator::Channel(int src, int dst, int64_t lane) {
  if (lane < 0) return absl::InvalidArgumentError(absl::StrCat("channel ", src, " > ", dst, ": lane ", lane, " is negative"));
  if (src < 0 || src >= size_ || dst < 0 || dst >= size_ || src == dst || (rank_ != src && rank_ != dst)) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank_, " of '", name(), "' (", size_,
                                                   " ranks) cannot take part in a channel from ", src, " to ", dst));
  }
  // Held while the two ends connect, as Split holds it: a rank makes its channels before its
  // first step, when nothing else uses this communicator.
  std::lock_guard<std::mutex> lock(mu_);
  if (!error_.ok()) {
    return absl::Status(error_.code(), absl::StrCat("channel ", src, " > ", dst, " of '", name(),
                                                    "': communicator unusable after an earlier error: ",
                                                    error_.message()));
  }
  auto it = channels_.find({src, dst, lane});
  if (it != channels_.end()) return it->second;
  CommConfig sub = config_;
  sub.name = absl::StrCat(name(), "/p2p{", src, ">", dst, "}", lane > 0 ? absl::StrCat(".lane", lane) : "");
  sub.world_ranks = {WorldRank(src), WorldRank(dst)};
  PDIST_ASSIGN_OR_RETURN(std::shared_ptr<Communicator> comm, CreateSubgroup({src, dst}, sub));
  channels_[{src, dst, lane}] = comm;
  return comm;
}

}  // namespace pdist::exec::comm
