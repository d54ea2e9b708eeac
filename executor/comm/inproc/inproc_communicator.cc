// Inproc backend: a rendezvous "slot" per collective, phases with deadlines, shared-memory copies.
#include "executor/comm/inproc/inproc_communicator.h"

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ir/status.h"

namespace pdist::exec::comm {
namespace inproc_internal {

// One collective (or one send/recv pair) in flight: what each participant published, and who
// reached which phase. Phase 0 = arrived (buffers and fingerprint published); phases 1 and 2
// are "done reading others' buffers", after which a buffer may be overwritten or freed.
struct Slot {
  static constexpr int kPhases = 3;
  explicit Slot(std::vector<int> ranks_in)
      : ranks(std::move(ranks_in)),
        fps(ranks.size()),
        in(ranks.size()),
        temp(ranks.size()),
        reached(kPhases, std::vector<bool>(ranks.size(), false)),
        count(kPhases, 0) {}
  std::vector<int> ranks;  // participant index → group rank
  std::vector<Fingerprint> fps;
  std::vector<const void*> in;
  std::vector<void*> temp;
  std::vector<std::vector<bool>> reached;
  std::vector<int> count;
  int left = 0;
  std::vector<char> staged;  // a send's copy of its tensor: the sender does not wait for the receiver
};

class Group {
 public:
  explicit Group(int size) : size_(size) {}
  int size() const { return size_; }

  std::shared_ptr<Slot> Join(const std::string& key, const std::vector<int>& ranks) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& slot = slots_[key];
    if (!slot) slot = std::make_shared<Slot>(ranks);
    return slot;
  }

  // Marks participant `me` at `phase` and waits for the others (publishing first, on phase 0).
  absl::Status Reach(Slot& slot, int me, int phase, const Fingerprint& fp, absl::Time deadline,
                     absl::Duration timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    const int n = static_cast<int>(slot.ranks.size());
    slot.reached[phase][me] = true;
    ++slot.count[phase];
    cv_.notify_all();
    const auto until = absl::ToChronoTime(deadline);
    while (slot.count[phase] < n && !aborted_) {
      if (cv_.wait_until(lock, until) == std::cv_status::timeout && slot.count[phase] < n) {
        std::vector<int> missing;
        for (int p = 0; p < n; ++p) {
          if (!slot.reached[phase][p]) missing.push_back(slot.ranks[p]);
        }
        return MissingRanks(fp, timeout, missing,
                            phase == 0 ? "" : absl::StrCat("they arrived but stalled in phase ", phase));
      }
    }
    if (aborted_) {
      return absl::AbortedError(absl::StrCat("group '", fp.group, "' was aborted during ", fp.ToString()));
    }
    return absl::OkStatus();
  }

  // Marks participant `me` at every phase at once, without waiting: a buffered send.
  void Post(Slot& slot, int me) {
    std::lock_guard<std::mutex> lock(mu_);
    for (int phase = 0; phase < Slot::kPhases; ++phase) {
      slot.reached[phase][me] = true;
      ++slot.count[phase];
    }
    cv_.notify_all();
  }

  void Leave(const std::string& key, Slot& slot) {
    std::lock_guard<std::mutex> lock(mu_);
    if (++slot.left == static_cast<int>(slot.ranks.size())) slots_.erase(key);
  }

  void Abort() {
    std::lock_guard<std::mutex> lock(mu_);
    aborted_ = true;
    cv_.notify_all();
  }

 private:
  const int size_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool aborted_ = false;
  std::map<std::string, std::shared_ptr<Slot>> slots_;
};

}  // namespace inproc_internal

using inproc_internal::Group;
using inproc_internal::Slot;

std::shared_ptr<Group> InprocWorld::GetGroup(const std::string& name, int size) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& group = groups_[name];
  if (!group) group = std::make_shared<Group>(size);
  return group;
}

namespace {

// [begin, end) of piece `i` when `count` elements are split over `n` ranks as evenly as possible.
std::pair<int64_t, int64_t> Piece(int64_t count, int n, int i) {
  return {count * i / n, count * (i + 1) / n};
}

const char* At(const void* p, int64_t bytes) { return static_cast<const char*>(p) + bytes; }

class InprocCommunicator : public Communicator {
 public:
  InprocCommunicator(std::shared_ptr<InprocWorld> world, std::shared_ptr<Group> group, int rank,
                     int size, CommConfig config)
      : Communicator(rank, size, std::move(config)), world_(std::move(world)), group_(std::move(group)) {}

 protected:
  absl::Status Run(const Call& call) override;

  absl::StatusOr<std::shared_ptr<Communicator>> CreateSubgroup(const std::vector<int>& members,
                                                              CommConfig config) override {
    const int me = static_cast<int>(std::find(members.begin(), members.end(), rank()) - members.begin());
    const int n = static_cast<int>(members.size());
    return std::shared_ptr<Communicator>(std::make_shared<InprocCommunicator>(
        world_, world_->GetGroup(config.name, n), me, n, std::move(config)));
  }

  void AbortBackend() override { group_->Abort(); }

 private:
  // Who takes part in a call: the group's ranks for a collective, (sender, receiver) for a
  // send/recv pair; the slot's key; this rank's index among them.
  struct Participants {
    std::vector<int> ranks;
    std::string key;
    int me = 0;
  };
  using Reach = std::function<absl::Status(int phase)>;

  Participants ParticipantsOf(const Call& call);
  // The scratch buffer this rank publishes for `fp` (nullptr when it needs none).
  void* ScratchFor(const Fingerprint& fp, int n, int me, bool aliased);
  absl::Status Exchange(const Fingerprint& fp, Slot& slot, int me, int n, bool aliased, Tensor* out, const Reach& reach);

  void* Scratch(int64_t bytes) {
    if (static_cast<int64_t>(scratch_.size()) < bytes) scratch_.resize(bytes);
    return scratch_.data();
  }

  std::shared_ptr<InprocWorld> world_;
  std::shared_ptr<Group> group_;
  std::mutex p2p_mu_;
  std::map<std::pair<int, int>, int64_t> p2p_issued_;  // rendezvous sends: (src, dst) → calls so far
  std::vector<char> scratch_;  // reused across calls: a fresh 64 MiB buffer per call page-faults
};

InprocCommunicator::Participants InprocCommunicator::ParticipantsOf(const Call& call) {
  const Fingerprint& fp = call.fp;
  Participants p;
  if (fp.kind == CollectiveKind::kSend || fp.kind == CollectiveKind::kRecv) {
    const int dst = fp.kind == CollectiveKind::kSend ? call.peer : rank();
    p.ranks = {fp.root, dst};
    p.me = fp.kind == CollectiveKind::kSend ? 0 : 1;
    if (!world_->options().rendezvous_sends) {
      p.key = absl::StrCat("p2p ", fp.root, ">", dst, "@", fp.tag, "#", fp.seq);
      return p;
    }
    // NCCL's pairing: the n-th send from fp.root to dst meets the n-th receive, whatever the tag.
    std::lock_guard<std::mutex> lock(p2p_mu_);
    p.key = absl::StrCat("p2p ", fp.root, ">", dst, "#", p2p_issued_[{fp.root, dst}]++);
    return p;
  }
  for (int r = 0; r < size(); ++r) p.ranks.push_back(r);
  p.key = absl::StrCat("#", fp.seq);
  p.me = rank();
  return p;
}

void* InprocCommunicator::ScratchFor(const Fingerprint& fp, int n, int me, bool aliased) {
  const int64_t esize = ir::DataTypeSize(fp.dtype);
  switch (fp.kind) {
    case CollectiveKind::kAllReduce: {
      auto [b, e] = Piece(fp.count, n, me);
      return Scratch((e - b) * esize);
    }
    case CollectiveKind::kReduceScatter: return Scratch(fp.count * esize / n);
    case CollectiveKind::kAllToAll: return aliased ? Scratch(fp.count * esize) : nullptr;
    default: return nullptr;
  }
}

absl::Status InprocCommunicator::Run(const Call& call) {
  const Fingerprint& fp = call.fp;
  const Participants who = ParticipantsOf(call);
  const int n = static_cast<int>(who.ranks.size());
  std::shared_ptr<Slot> slot = group_->Join(who.key, who.ranks);
  if (fp.kind == CollectiveKind::kSend && !world_->options().rendezvous_sends) {
    // Sends are buffered, as pipeline schedules need: a stage sends an activation and goes on to
    // its next job, which may receive from the same peer before that peer receives this.
    const int64_t bytes = fp.count * ir::DataTypeSize(fp.dtype);
    slot->staged.assign(static_cast<const char*>(call.in->raw()), static_cast<const char*>(call.in->raw()) + bytes);
    slot->fps[who.me] = fp;
    slot->in[who.me] = slot->staged.data();
    group_->Post(*slot, who.me);
    group_->Leave(who.key, *slot);
    return absl::OkStatus();
  }
  // Publish, then wait for everyone.
  const bool aliased = call.in != nullptr && call.out != nullptr && call.in->raw() == call.out->raw();
  slot->fps[who.me] = fp;
  slot->in[who.me] = call.in != nullptr ? call.in->raw() : nullptr;
  slot->temp[who.me] = ScratchFor(fp, n, who.me, aliased);
  const Reach reach = [&](int phase) { return group_->Reach(*slot, who.me, phase, fp, call.deadline, config().timeout); };
  absl::Status status = reach(0);
  const bool p2p = fp.kind == CollectiveKind::kSend || fp.kind == CollectiveKind::kRecv;
  for (int p = 0; status.ok() && p < n; ++p) {
    Fingerprint theirs = slot->fps[p];
    if (p2p) theirs.kind = fp.kind;  // a send pairs with a recv
    if (!(theirs == fp)) status = FingerprintMismatch(fp, rank(), slot->fps[p], who.ranks[p]);
  }
  if (status.ok()) status = Exchange(fp, *slot, who.me, n, aliased, call.out, reach);
  group_->Leave(who.key, *slot);
  return status;
}

// Every participant has published its input (and scratch) in `slot`: each copies and reduces
// what it needs, meeting the others at the phases where a buffer changes hands.
absl::Status InprocCommunicator::Exchange(const Fingerprint& fp, Slot& slot, int me, int n, bool aliased,
                                          Tensor* out_tensor, const Reach& reach) {
  const int64_t esize = ir::DataTypeSize(fp.dtype);
  const int64_t bytes = fp.count * esize;
  char* out = out_tensor != nullptr ? static_cast<char*>(out_tensor->raw()) : nullptr;
  void* temp = slot.temp[me];
  absl::Status status;
  switch (fp.kind) {
    case CollectiveKind::kAllReduce: {
      // Phase 1: reduce my piece of every input; phase 2: gather every rank's reduced piece.
      auto [b, e] = Piece(fp.count, n, me);
      std::vector<const void*> inputs;
      for (int p = 0; p < n; ++p) inputs.push_back(At(slot.in[p], b * esize));
      status = ReduceRange(fp.dtype, fp.reduce, inputs, temp, 0, e - b);
      if (status.ok()) status = reach(1);
      for (int p = 0; status.ok() && p < n; ++p) {
        auto [pb, pe] = Piece(fp.count, n, p);
        std::memcpy(out + pb * esize, slot.temp[p], (pe - pb) * esize);
      }
      if (status.ok()) status = reach(2);
      break;
    }
    case CollectiveKind::kReduceScatter: {
      const int64_t piece = fp.count / n;
      std::vector<const void*> inputs;
      for (int p = 0; p < n; ++p) inputs.push_back(At(slot.in[p], me * piece * esize));
      status = ReduceRange(fp.dtype, fp.reduce, inputs, temp, 0, piece);
      if (status.ok()) status = reach(1);  // inputs no longer read: `out` may overwrite one
      if (status.ok()) std::memcpy(out, temp, piece * esize);
      break;
    }
    case CollectiveKind::kAllGather:
      for (int p = 0; p < n; ++p) std::memcpy(out + p * bytes, slot.in[p], bytes);
      status = reach(1);
      break;
    case CollectiveKind::kAllToAll: {
      const int64_t piece = bytes / n;
      char* dst = aliased ? static_cast<char*>(temp) : out;
      for (int p = 0; p < n; ++p) std::memcpy(dst + p * piece, At(slot.in[p], me * piece), piece);
      status = reach(1);
      if (status.ok() && aliased) std::memcpy(out, temp, bytes);
      break;
    }
    case CollectiveKind::kBroadcast:
      if (me != fp.root) std::memcpy(out, slot.in[fp.root], bytes);
      status = reach(1);
      break;
    case CollectiveKind::kSend:
    case CollectiveKind::kRecv:
      if (me == 1) std::memcpy(out, slot.in[0], bytes);
      status = reach(1);
      break;
    case CollectiveKind::kBarrier:
      break;
  }
  return status;
}

}  // namespace

absl::StatusOr<std::shared_ptr<Communicator>> CreateInprocCommunicator(
    std::shared_ptr<InprocWorld> world, int rank, CommConfig config) {
  if (world == nullptr) return absl::InvalidArgumentError("CreateInprocCommunicator: no world");
  if (rank < 0 || rank >= world->size()) {
    return absl::InvalidArgumentError(absl::StrCat("CreateInprocCommunicator: rank ", rank,
                                                   " is outside a world of ", world->size()));
  }
  auto group = world->GetGroup(config.name, world->size());
  const int size = world->size();
  return std::shared_ptr<Communicator>(
      std::make_shared<InprocCommunicator>(std::move(world), std::move(group), rank, size, std::move(config)));
}

}  // namespace pdist::exec::comm
