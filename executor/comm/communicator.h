// Communicator: the NCCL-shaped collective interface every backend (inproc, gloo) implements.
//
// A communicator is an opaque handle made from (a rendezvous: world object or store, rank,
// size) plus a CommConfig. Every collective is checked before it moves data: it gets the next
// sequence number of its group and a fingerprint (op, dtype, count, group) that must agree on
// every rank, and it has a deadline, so a rank that never arrives turns into an error naming
// the group, the collective, its sequence number and the missing ranks — never a hang.
//
//   auto world = std::make_shared<InprocWorld>(2);           // one per "job"
//   // on each of 2 threads:
//   PDIST_ASSIGN_OR_RETURN(auto comm, CreateInprocCommunicator(world, rank, {}));
//   PDIST_RETURN_IF_ERROR(comm->AllReduce(grad, grad, ReduceOp::kSum));   // in place
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <tuple>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "executor/stream.h"
#include "executor/tensor.h"

namespace pdist::exec::comm {

// Reductions, as NCCL's ncclSum / ncclAvg / ncclMax. kAvg is float-only.
enum class ReduceOp : int8_t { kSum, kAvg, kMax };
const char* ReduceOpName(ReduceOp op);
// Whether the host backends define `op` for `dtype` (else the error).
absl::Status CheckReducible(ir::DataType dtype, ReduceOp op);

// Creation options (NCCL's ncclConfig_t). Sub-groups made by Split inherit them.
struct CommConfig {
  // How long a collective waits for the other ranks before failing with DeadlineExceeded.
  absl::Duration timeout = absl::Seconds(300);
  // Name of the group in errors ("world", "world/{0,2}" for a sub-group).
  std::string name = "world";
  // The group's ranks as the world numbers them (empty: the group is the world). Errors name
  // world ranks, whichever group they happen in. Split and Channel fill it.
  std::vector<int> world_ranks;
};

// Rank `r` of the group `config` describes, as the world numbers it.
int WorldRankOf(const CommConfig& config, int r);
// Ranks of that group as the world numbers them, joined by ", ".
std::string WorldRanksOf(const CommConfig& config, const std::vector<int>& ranks);

// The kinds of collective; each has a printed name ("all_reduce") used in fingerprints.
enum class CollectiveKind : int8_t {
  kAllReduce, kAllGather, kReduceScatter, kAllToAll, kBroadcast, kSend, kRecv, kBarrier
};
const char* CollectiveName(CollectiveKind kind);

// What a rank says it is doing; every participant must say the same thing.
//   all_reduce(sum) f32 x1024 in world#7
struct Fingerprint {
  CollectiveKind kind = CollectiveKind::kBarrier;
  ReduceOp reduce = ReduceOp::kSum;  // meaningful for reductions only
  ir::DataType dtype = ir::DataType::kFloat32;
  int64_t count = 0;   // elements of the (per-rank) input
  int root = -1;       // broadcast root; for send/recv the (group) rank of the sender
  std::string group;
  int64_t seq = 0;     // per-group sequence number (per ordered pair and tag for send/recv)
  int64_t tag = 0;     // send/recv: the channel; a recv takes the next message of its tag
  // Not compared, not sent: the local group's CommConfig::world_ranks, so that errors built
  // from this fingerprint name world ranks (null: the group is the world).
  std::shared_ptr<const std::vector<int>> world_ranks;

  bool operator==(const Fingerprint& o) const {
    return kind == o.kind && reduce == o.reduce && dtype == o.dtype && count == o.count &&
           root == o.root && group == o.group && seq == o.seq && tag == o.tag;
  }
  // Group rank `r` as the world numbers it.
  int WorldRank(int r) const;
  std::string ToString() const;
};

// The errors below take group ranks and name world ranks (Fingerprint::world_ranks of `fp` or
// `mine`).
// The error a mismatch produces (InternalError), naming both fingerprints.
absl::Status FingerprintMismatch(const Fingerprint& mine, int my_rank, const Fingerprint& theirs,
                                 int their_rank);
// The error a timeout produces (DeadlineExceeded): "... ranks that did not arrive: 2, 3".
absl::Status MissingRanks(const Fingerprint& fp, absl::Duration timeout,
                          const std::vector<int>& missing, const std::string& detail = "");
// The error when peers closed their connections (Unavailable): "... ranks that closed it: 1".
absl::Status LostRanks(const Fingerprint& fp, const std::vector<int>& lost, const std::string& detail = "");

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const CommConfig& config() const { return config_; }
  const std::string& name() const { return config_.name; }

  // Collectives. `out` is preallocated by the caller (like NCCL's recvbuff) and may be the
  // same tensor as `in` where shapes allow (in place). Pieces split or concatenate along
  // dim 0, which must divide evenly by size().
  //   AllReduce:     out = reduce_r in_r                         (same shape as in)
  //   AllGather:     out = concat(in_0, …, in_{n-1})             (out.dim0 = n · in.dim0)
  //   ReduceScatter: out = piece `rank` of reduce_r in_r         (in.dim0 = n · out.dim0)
  //   AllToAll:      out piece s = piece `rank` of in_s          (same shape as in)
  //
  // `stream`: where a device backend (NCCL) enqueues the transfer — it returns once it is
  // enqueued, and work after it on the stream sees the result. Host backends run the transfer
  // at once, on the calling thread, and ignore it.
  absl::Status AllReduce(const Tensor& in, Tensor& out, ReduceOp op, Stream* stream = nullptr);
  absl::Status AllGather(const Tensor& in, Tensor& out, Stream* stream = nullptr);
  absl::Status ReduceScatter(const Tensor& in, Tensor& out, ReduceOp op, Stream* stream = nullptr);
  absl::Status AllToAll(const Tensor& in, Tensor& out, Stream* stream = nullptr);
  // Root's `buffer` is copied into every other rank's `buffer`.
  absl::Status Broadcast(Tensor& buffer, int root, Stream* stream = nullptr);
  // Point to point; a Send to `peer` pairs with that peer's Recv from this rank, in order. A Send
  // is buffered: it returns once the tensor is copied out, without waiting for the Recv, so
  // that pipeline stages can send and go on (a rendezvous send deadlocks 1F1B on one stream).
  absl::Status Send(const Tensor& tensor, int peer, int64_t tag = 0, Stream* stream = nullptr);
  absl::Status Recv(Tensor& tensor, int peer, int64_t tag = 0, Stream* stream = nullptr);
  absl::Status Barrier();
  // With its own deadline, `timeout` from now instead of the communicator's: a wait for work of
  // unbounded length on the peers (a checkpoint's files being written), not for a collective.
  absl::Status Barrier(absl::Duration timeout);

  // Collective over this communicator (like ncclCommSplit): ranks with the same `color` form
  // a sub-group, ordered by (key, rank). The sub-communicator is created once per member set
  // and cached, so asking again for the same mesh axis returns the same handle.
  //   ranks 0..3, Split(rank % 2, rank) → {0,2} and {1,3}; names "world/{0,2}", "world/{1,3}"
  // A negative `color` joins no group (NCCL_SPLIT_NOCOLOR): the call still takes part in the
  // exchange and returns nullptr.
  absl::StatusOr<std::shared_ptr<Communicator>> Split(int color, int key);

  // The communicator of two ranks, `src` first, that carries only the point-to-point messages
  // from `src` to `dst` (this rank is one of them). Made by those two alone — not a collective
  // of this communicator — once, then kept:
  //   rank 0: Channel(0, 1) then Channel(1, 0);   rank 1: the same two calls, in the same order
  // Why: NCCL pairs a send with the peer's receive in issue order and holds the send until the
  // receive runs, so a pipeline stage whose sends and receives queue on one stream deadlocks
  // (stage 0 sends an activation while stage 1 sends a gradient back, each waiting for the
  // other's receive behind it). The executor gives each direction its own stream, and streams
  // that run at once need communicators of their own. Two ranks that share several channels
  // must make them in one order (CommGroups sorts them).
  // `lane` > 0: another channel for the same direction, for messages that the schedule does not
  // issue in one order with the lane-0 ones on both ends (ir/ops/collective.cc, c_send's `lane`).
  absl::StatusOr<std::shared_ptr<Communicator>> Channel(int src, int dst, int64_t lane = 0);

  // Wakes and fails every pending and later collective of this communicator and of the
  // sub-groups and channels made from it (ncclCommAbort).
  void Abort();
  // The first error any collective hit (ncclCommGetAsyncError); OK while healthy. A
  // communicator that timed out or saw a mismatch is out of step with its peers, so every
  // later collective returns this error too.
  absl::Status AsyncError() const;

 protected:
  Communicator(int rank, int size, CommConfig config)
      : rank_(rank), size_(size), config_(std::move(config)),
        world_ranks_(config_.world_ranks.empty() ? nullptr : std::make_shared<const std::vector<int>>(config_.world_ranks)) {}
  // Rank `r` of this group as the world numbers it.
  int WorldRank(int r) const;

  // A validated call: fingerprint (with its sequence number) and buffers. For AllReduce etc.
  // `in`/`out` are as passed; for Broadcast both are the buffer; Send has only `in`, Recv only
  // `out`; `peer` is the other side of send/recv.
  struct Call {
    Fingerprint fp;
    const Tensor* in = nullptr;
    Tensor* out = nullptr;
    int peer = -1;
    absl::Time deadline;
    Stream* stream = nullptr;  // as the collective was given it
  };
  // The backend moves the data. It may assume shapes and dtypes were checked.
  virtual absl::Status Run(const Call& call) = 0;
  // A communicator over `members` (ranks of this communicator, in sub-group rank order),
  // called by every member with the same arguments.
  virtual absl::StatusOr<std::shared_ptr<Communicator>> CreateSubgroup(
      const std::vector<int>& members, CommConfig config) = 0;
  // Backend part of Abort (wake waiters).
  virtual void AbortBackend() {}
  // Whether this backend reduces `dtype` with `op` (default: CheckReducible's host set).
  virtual absl::Status CheckReduction(ir::DataType dtype, ReduceOp op) const { return CheckReducible(dtype, op); }
  // Makes `status` the communicator's sticky error unless it has one: for a backend whose
  // collectives fail after Run returned (a watchdog's deadline, an asynchronous NCCL error).
  void RecordError(absl::Status status);

 private:
  absl::Status Start(CollectiveKind kind, ReduceOp reduce, const Tensor* in, Tensor* out,
                     int root_or_peer, int64_t tag = 0, Stream* stream = nullptr,
                     std::optional<absl::Duration> timeout = std::nullopt);

  int rank_;
  int size_;
  CommConfig config_;
  std::shared_ptr<const std::vector<int>> world_ranks_;  // config_.world_ranks, for fingerprints
  int64_t seq_ = 0;                          // next collective's sequence number
  std::map<std::tuple<int, int, int64_t>, int64_t> p2p_seq_;  // (src, dst, tag) → next send/recv number
  mutable std::mutex mu_;
  absl::Status error_;                       // sticky first error
  std::map<std::vector<int>, std::shared_ptr<Communicator>> subgroups_;
  std::map<std::tuple<int, int, int64_t>, std::shared_ptr<Communicator>> channels_;  // (src, dst, lane)
};

// Helpers shared by the backends.

// Elementwise reduction of `inputs` (in the order given: rank order) into `out`, over elements
// [begin, end). kAvg divides by inputs.size(). Supports f32/f64 and (sum, max) i32/i64.
absl::Status ReduceRange(ir::DataType dtype, ReduceOp op, const std::vector<const void*>& inputs,
                         void* out, int64_t begin, int64_t end);

}  // namespace pdist::exec::comm
