// ProgressBoard: fingerprints posted to the store, and the diagnosis of a stuck collective.
#include "executor/comm/progress_board.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "ir/status.h"

namespace pdist::exec::comm {

std::string EncodeFingerprint(const Fingerprint& fp) {
  return absl::StrCat(static_cast<int>(fp.kind), ",", static_cast<int>(fp.reduce), ",", static_cast<int>(fp.dtype), ",",
                      fp.count, ",", fp.root, ",", fp.seq, ",", fp.tag);
}

absl::StatusOr<Fingerprint> DecodeFingerprint(const std::string& text, const std::string& group) {
  const std::vector<std::string> fields = absl::StrSplit(text, ',');
  std::vector<int64_t> v(fields.size());
  bool ok = fields.size() == 7;
  for (size_t i = 0; ok && i < fields.size(); ++i) ok = absl::SimpleAtoi(fields[i], &v[i]);
  if (!ok || v[0] < 0 || v[0] > static_cast<int64_t>(CollectiveKind::kBarrier) || v[1] < 0 ||
      v[1] > static_cast<int64_t>(ReduceOp::kMax)) {
    return absl::InvalidArgumentError(absl::StrCat("progress board of group '", group, "': '", text,
                                                   "' is not a posted fingerprint"));
  }
  Fingerprint fp;
  fp.kind = static_cast<CollectiveKind>(v[0]);
  fp.reduce = static_cast<ReduceOp>(v[1]);
  fp.dtype = static_cast<ir::DataType>(v[2]);
  fp.count = v[3];
  fp.root = static_cast<int>(v[4]);
  fp.seq = v[5];
  fp.tag = v[6];
  fp.group = group;
  return fp;
}

std::string ProgressBoard::KeyOf(int rank) const { return absl::StrCat("progress/", group_, "/", rank); }

absl::Status ProgressBoard::Post(const Fingerprint& fp) { return store_->Set(KeyOf(rank_), EncodeFingerprint(fp)); }

absl::StatusOr<std::optional<Fingerprint>> ProgressBoard::LatestOf(int rank) const {
  PDIST_ASSIGN_OR_RETURN(std::optional<std::string> text, store_->TryGet(KeyOf(rank)));
  if (!text) return std::nullopt;
  PDIST_ASSIGN_OR_RETURN(Fingerprint fp, DecodeFingerprint(*text, group_));
  return fp;
}

absl::Status ProgressBoard::Diagnose(const Fingerprint& stuck, absl::Duration timeout, int peer) const {
  if (stuck.kind == CollectiveKind::kSend || stuck.kind == CollectiveKind::kRecv) {
    // Point to point waits for its one peer (whose posted sequence numbers count other pairs). On
    // a GPU the peer may have enqueued its side behind work that waits itself.
    return MissingRanks(stuck, timeout, {peer},
                        stuck.kind == CollectiveKind::kSend ? "its receive never ran" : "its send never ran");
  }
  std::vector<int> missing;
  std::vector<std::string> details;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    PDIST_ASSIGN_OR_RETURN(std::optional<Fingerprint> theirs, LatestOf(r));
    if (theirs) theirs->world_ranks = stuck.world_ranks;  // numbered as this group is
    if (!theirs) {
      missing.push_back(r);
      details.push_back(absl::StrCat("rank ", stuck.WorldRank(r), " started nothing in the group"));
    } else if (theirs->seq < stuck.seq) {
      missing.push_back(r);
      details.push_back(absl::StrCat("rank ", stuck.WorldRank(r), " last started ", theirs->ToString()));
    } else if (theirs->seq == stuck.seq && !(*theirs == stuck)) {
      return FingerprintMismatch(stuck, rank_, *theirs, r);
    }
  }
  if (missing.empty()) {
    return absl::DeadlineExceededError(absl::StrCat(
        "timeout after ", absl::FormatDuration(timeout), " in group '", stuck.group, "' waiting for ", stuck.ToString(),
        ": every rank started it, so the transfer itself is stuck (a device, the network, or on a GPU, where started "
        "means enqueued, work before it on the ranks' streams)"));
  }
  return MissingRanks(stuck, timeout, missing, absl::StrJoin(details, "; "));
}

}  // namespace pdist::exec::comm
