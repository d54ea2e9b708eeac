// Gloo backend: store rendezvous, fingerprint exchange over unbound buffers, legacy algorithms.
#include "executor/comm/gloo/gloo_communicator.h"

#include <signal.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>

#include <gloo/allgather_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/broadcast_one_to_all.h>
#include <gloo/common/error.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>

#include "absl/strings/numbers.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "executor/comm/gloo/tcp_store.h"
#include "executor/dtype_dispatch.h"
#include "ir/status.h"

namespace pdist::exec::comm {
namespace {

using Millis = std::chrono::milliseconds;

Millis Remaining(absl::Time deadline) {
  return Millis(std::max<int64_t>(1, absl::ToInt64Milliseconds(deadline - absl::Now())));
}

// Unbound-buffer slots (Gloo tags). Algorithm classes take small slots from
// Context::nextSlot(); ours live in the top byte so the two never collide.
constexpr uint64_t kFingerprintTag = uint64_t{1} << 56;
constexpr uint64_t kDataTag = uint64_t{2} << 56;
// Send/recv pairs (src, dst) get their own numbering: pair index src·size + dst + 1, and within
// a pair the message tag (12 bits) and its sequence number (24 bits) share the low 36 bits.
// Both wrap: tags t and t + 4096 share slots, which matters only if both have a message in
// flight between the same pair at once (a program with over 4096 moves between meshes); the
// fingerprint carries the whole tag, so that is reported as a mismatch, never misdelivered.
uint64_t Slot(uint64_t tag, const Fingerprint& fp, int size, int my_rank, int peer) {
  const bool p2p = fp.kind == CollectiveKind::kSend || fp.kind == CollectiveKind::kRecv;
  const int dst = fp.kind == CollectiveKind::kSend ? peer : my_rank;
  const uint64_t pair = p2p ? uint64_t(fp.root) * size + dst + 1 : 0;  // collectives: pair 0
  const uint64_t low = p2p ? ((uint64_t(fp.tag) & 0xFFF) << 24) | (uint64_t(fp.seq) & 0xFFFFFF)
                           : uint64_t(fp.seq) & ((uint64_t{1} << 36) - 1);
  return tag | (pair << 36) | low;
}

// A fingerprint as 7 integers on the wire; a send and its recv encode alike.
using Wire = std::array<int64_t, 7>;
Wire Encode(const Fingerprint& fp) {
  const auto kind = fp.kind == CollectiveKind::kRecv ? CollectiveKind::kSend : fp.kind;
  return {int64_t(kind), int64_t(fp.reduce), int64_t(fp.dtype), fp.count, fp.root, fp.seq, fp.tag};
}
Fingerprint Decode(const Wire& w, const std::string& group) {
  Fingerprint fp;
  fp.kind = CollectiveKind(w[0]);
  fp.reduce = ReduceOp(w[1]);
  fp.dtype = ir::DataType(w[2]);
  fp.count = w[3];
  fp.root = int(w[4]);
  fp.seq = w[5];
  fp.tag = w[6];
  fp.group = group;
  return fp;
}

template <typename T>
const gloo::ReductionFunction<T>* GlooReduction(ReduceOp op) {
  return op == ReduceOp::kMax ? gloo::ReductionFunction<T>::max : gloo::ReductionFunction<T>::sum;
}

template <typename T>
void DivideBy(void* data, int64_t count, int n) {
  T* p = static_cast<T*>(data);
  for (int64_t i = 0; i < count; ++i) p[i] /= static_cast<T>(n);
}

class GlooCommunicator : public Communicator {
 public:
  GlooCommunicator(std::shared_ptr<gloo::rendezvous::Store> root_store,
                   std::shared_ptr<gloo::transport::Device> device,
                   std::shared_ptr<gloo::rendezvous::Context> context, CommConfig config)
      : Communicator(context->rank, context->size, std::move(config)),
        root_store_(std::move(root_store)),
        device_(std::move(device)),
        context_(std::move(context)) {}
  // Buffered sends still in flight are delivered first: the receiver may not have posted its
  // recv yet (the last stage's final send of a step), and Gloo sends only when it has.
  ~GlooCommunicator() override {
    try {
      ReapSends(0);
    } catch (...) {
    }
  }

  // Connects rank `rank` of `size` through `root_store` under the key prefix `prefix`.
  static absl::StatusOr<std::shared_ptr<Communicator>> Connect(
      std::shared_ptr<gloo::rendezvous::Store> root_store, std::shared_ptr<gloo::transport::Device> device,
      const std::string& prefix, int rank, int size, CommConfig config);

 protected:
  absl::Status Run(const Call& call) override;

  absl::StatusOr<std::shared_ptr<Communicator>> CreateSubgroup(const std::vector<int>& members,
                                                              CommConfig config) override {
    const int me = static_cast<int>(std::find(members.begin(), members.end(), rank()) - members.begin());
    std::string prefix = "pdist-sub/" + config.name;  // before `config` is moved from
    return Connect(root_store_, device_, prefix, me, static_cast<int>(members.size()), std::move(config));
  }

 private:
  absl::Status ExchangeFingerprints(const Call& call);
  absl::Status MoveData(const Call& call);
  // Sends piece `p` of `in` to every rank p and receives piece p of `out` from it (all_to_all),
  // or one buffer to / from `call.peer` (send/recv), on unbound buffers.
  void PointToPoint(const Call& call);
  void Wait(gloo::transport::UnboundBuffer& buffer, bool recv, int times, absl::Time deadline);
  // A buffered send (Communicator::Send): the fingerprint and a copy of the tensor are posted,
  // and the call returns; Gloo delivers them when the peer posts its recv.
  absl::Status PostSend(const Call& call);
  // Waits for the oldest posted sends until at most `keep` remain; throws on a broken peer.
  void ReapSends(size_t keep);

  struct PendingSend {
    std::shared_ptr<Wire> fingerprint;
    std::shared_ptr<std::vector<char>> data;
    std::shared_ptr<gloo::transport::UnboundBuffer> fingerprint_buffer, data_buffer;
    Fingerprint fp;
  };
  // Enough for every activation and gradient a pipeline stage has in flight.
  static constexpr size_t kMaxPendingSends = 256;

  // Buffers of an operation that timed out: Gloo may still write into them, so they are kept
  // (never freed while the context lives). Declared first: destroyed after context_.
  std::vector<std::shared_ptr<void>> abandoned_;
  std::shared_ptr<gloo::rendezvous::Store> root_store_;
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::rendezvous::Context> context_;
  std::vector<char> scratch_;
  std::deque<PendingSend> pending_sends_;
};

absl::StatusOr<std::shared_ptr<Communicator>> GlooCommunicator::Connect(
    std::shared_ptr<gloo::rendezvous::Store> root_store, std::shared_ptr<gloo::transport::Device> device,
    const std::string& prefix, int rank, int size, CommConfig config) {
  const std::string where = absl::StrCat("connecting rank ", WorldRankOf(config, rank), " of group '", config.name, "'");
  const char* step = "announcing";
  try {
    gloo::rendezvous::PrefixStore store(prefix, *root_store);
    // Announce, then wait for everyone: this names the ranks that never started, which
    // Gloo's own connect (a bare store timeout) cannot.
    store.set(absl::StrCat("arrived/", rank), {'1'});
    const absl::Time deadline = absl::Now() + config.timeout;
    std::vector<int> missing;
    for (int r = 0; r < size; ++r) {
      try {
        store.wait({absl::StrCat("arrived/", r)}, missing.empty() ? Remaining(deadline) : Millis(1));
      } catch (const std::exception&) {  // FileStore's timeout
        missing.push_back(r);
      }
    }
    if (!missing.empty()) {
      return absl::DeadlineExceededError(absl::StrCat(
          "timeout after ", absl::FormatDuration(config.timeout), " ", where,
          ": ranks that did not arrive: ", WorldRanksOf(config, missing)));
    }
    step = "connecting the mesh";
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    context->setTimeout(Millis(absl::ToInt64Milliseconds(config.timeout)));
    context->connectFullMesh(store, device);
    return std::shared_ptr<Communicator>(
        std::make_shared<GlooCommunicator>(std::move(root_store), std::move(device), std::move(context),
                                           std::move(config)));
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(where, " (", step, "): gloo: ", e.what()));
  }
}

void GlooCommunicator::Wait(gloo::transport::UnboundBuffer& buffer, bool recv, int times, absl::Time deadline) {
  for (int i = 0; i < times; ++i) {
    const bool ok = recv ? buffer.waitRecv(Remaining(deadline)) : buffer.waitSend(Remaining(deadline));
    if (!ok) throw gloo::IoException("operation aborted");
  }
}

absl::Status GlooCommunicator::ExchangeFingerprints(const Call& call) {
  const Fingerprint& fp = call.fp;
  std::vector<int> peers;
  if (call.peer >= 0) {
    peers = {call.peer};
  } else {
    for (int r = 0; r < size(); ++r) {
      if (r != rank()) peers.push_back(r);
    }
  }
  // Heap storage: on a timeout Gloo may still write into it after we return. One buffer per
  // peer, so that one dead or late peer fails only its own wait and the others are still
  // heard: the error then names exactly the ranks that did not arrive.
  auto mine = std::make_shared<Wire>(Encode(fp));
  auto theirs = std::shared_ptr<Wire[]>(new Wire[size()]);
  const uint64_t slot = Slot(kFingerprintTag, fp, size(), rank(), call.peer);
  // A recv hears the sender's fingerprint; the buffered send posted it without waiting.
  const bool receive_only = fp.kind == CollectiveKind::kRecv;
  std::vector<std::shared_ptr<gloo::transport::UnboundBuffer>> sends, recvs;
  std::vector<int> missing;
  std::string detail;
  bool timed_out = false;  // else every lost peer closed its connection: it exited, crashed or aborted
  auto lost = [&](int peer, const std::exception& e) {
    missing.push_back(peer);
    timed_out = timed_out || std::string(e.what()).find("Timed out") != std::string::npos;
    if (detail.empty()) detail = absl::StrCat("gloo: ", e.what());
  };
  std::vector<int> posted;
  for (int p : peers) {
    std::shared_ptr<gloo::transport::UnboundBuffer> send(context_->createUnboundBuffer(mine.get(), sizeof(Wire)));
    std::shared_ptr<gloo::transport::UnboundBuffer> recv(context_->createUnboundBuffer(&theirs[p], sizeof(Wire)));
    try {  // posting fails at once on a connection that already broke
      if (!receive_only) send->send(p, slot);
      recv->recv(p, slot);
      sends.push_back(send);
      recvs.push_back(recv);
      posted.push_back(p);
    } catch (const std::exception& e) {
      abandoned_.insert(abandoned_.end(), {send, recv});
      lost(p, e);
    }
  }
  for (size_t i = 0; i < posted.size(); ++i) {
    try {
      Wait(*recvs[i], /*recv=*/true, 1, call.deadline);
      if (!receive_only) Wait(*sends[i], /*recv=*/false, 1, call.deadline);
    } catch (const std::exception& e) {
      lost(posted[i], e);
    }
  }
  if (!missing.empty()) {
    abandoned_.insert(abandoned_.end(), {mine, theirs});
    abandoned_.insert(abandoned_.end(), sends.begin(), sends.end());
    abandoned_.insert(abandoned_.end(), recvs.begin(), recvs.end());
    std::sort(missing.begin(), missing.end());
    if (!timed_out) return LostRanks(fp, missing, detail);
    return MissingRanks(fp, config().timeout, missing, detail);
  }
  for (int p : peers) {
    Fingerprint other = Decode(theirs[p], fp.group);
    if (Encode(other) != Encode(fp)) {
      other.kind = CollectiveKind(theirs[p][0]);
      return FingerprintMismatch(fp, rank(), other, p);
    }
  }
  return absl::OkStatus();
}

void GlooCommunicator::PointToPoint(const Call& call) {
  const Fingerprint& fp = call.fp;
  const uint64_t slot = Slot(kDataTag, fp, size(), rank(), call.peer);
  const int64_t bytes = fp.count * ir::DataTypeSize(fp.dtype);
  if (fp.kind == CollectiveKind::kRecv) {  // sends are posted by PostSend
    auto buffer = context_->createUnboundBuffer(call.out->raw(), bytes);
    buffer->recv(call.peer, slot);
    Wait(*buffer, /*recv=*/true, 1, call.deadline);
    return;
  }
  // all_to_all: stage the input when it is also the output (peers read it while we write).
  const int n = size();
  const int64_t piece = bytes / n;
  void* in = call.in->raw();
  if (in == call.out->raw()) {
    scratch_.resize(bytes);
    std::memcpy(scratch_.data(), in, bytes);
    in = scratch_.data();
  }
  auto send = context_->createUnboundBuffer(in, bytes);
  auto recv = context_->createUnboundBuffer(call.out->raw(), bytes);
  for (int p = 0; p < n; ++p) {
    if (p == rank()) continue;
    send->send(p, slot, p * piece, piece);
    recv->recv(p, slot, p * piece, piece);
  }
  std::memcpy(static_cast<char*>(call.out->raw()) + rank() * piece, static_cast<char*>(in) + rank() * piece, piece);
  Wait(*recv, true, n - 1, call.deadline);
  Wait(*send, false, n - 1, call.deadline);
}

absl::Status GlooCommunicator::MoveData(const Call& call) {
  const Fingerprint& fp = call.fp;
  const int n = size();
  const int64_t esize = ir::DataTypeSize(fp.dtype);
  const int64_t bytes = fp.count * esize;
  switch (fp.kind) {
    case CollectiveKind::kAllReduce:
    case CollectiveKind::kReduceScatter: {
      // Both run in place on a full-size buffer: `out` for all_reduce, scratch for
      // reduce_scatter (whose output is one piece).
      const bool all = fp.kind == CollectiveKind::kAllReduce;
      void* buf = all ? call.out->raw() : (scratch_.resize(bytes), scratch_.data());
      if (buf != call.in->raw()) std::memcpy(buf, call.in->raw(), bytes);
      const int64_t piece = fp.count / n;
      PDIST_DISPATCH_ALL(fp.dtype, T, {
        if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> ||
                      std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>) {
          T* p = static_cast<T*>(buf);
          if (all) {
            gloo::AllreduceRingChunked<T>(context_, {p}, fp.count, GlooReduction<T>(fp.reduce)).run();
          } else {
            gloo::ReduceScatterHalvingDoubling<T>(context_, {p}, fp.count, std::vector<int>(n, piece),
                                                  GlooReduction<T>(fp.reduce)).run();
          }
          // ReduceScatterHalvingDoubling leaves this rank's piece at the front of the buffer.
          if (!all) std::memcpy(call.out->raw(), p, piece * esize);
          if (fp.reduce == ReduceOp::kAvg) DivideBy<T>(call.out->raw(), call.out->num_elements(), n);
        }
      });
      return absl::OkStatus();
    }
    case CollectiveKind::kAllGather:
      // dtype does not matter for a copy: move bytes.
      gloo::AllgatherRing<char>(context_, {static_cast<const char*>(call.in->raw())},
                                static_cast<char*>(call.out->raw()), bytes).run();
      return absl::OkStatus();
    case CollectiveKind::kBroadcast:
      gloo::BroadcastOneToAll<char>(context_, {static_cast<char*>(call.out->raw())}, bytes, fp.root).run();
      return absl::OkStatus();
    case CollectiveKind::kAllToAll:
    case CollectiveKind::kSend:
    case CollectiveKind::kRecv:
      PointToPoint(call);
      return absl::OkStatus();
    case CollectiveKind::kBarrier:
      return absl::OkStatus();  // the fingerprint exchange already met every rank
  }
  return absl::OkStatus();
}

absl::Status GlooCommunicator::PostSend(const Call& call) {
  const Fingerprint& fp = call.fp;
  PendingSend send;
  send.fp = fp;
  send.fingerprint = std::make_shared<Wire>(Encode(fp));
  const char* raw = static_cast<const char*>(call.in->raw());
  send.data = std::make_shared<std::vector<char>>(raw, raw + fp.count * ir::DataTypeSize(fp.dtype));
  send.fingerprint_buffer = context_->createUnboundBuffer(send.fingerprint.get(), sizeof(Wire));
  send.data_buffer = context_->createUnboundBuffer(send.data->data(), send.data->size());
  try {  // posting fails at once on a connection that already broke
    send.fingerprint_buffer->send(call.peer, Slot(kFingerprintTag, fp, size(), rank(), call.peer));
    send.data_buffer->send(call.peer, Slot(kDataTag, fp, size(), rank(), call.peer));
  } catch (const std::exception& e) {
    abandoned_.insert(abandoned_.end(), {send.fingerprint, send.data, send.fingerprint_buffer, send.data_buffer});
    return LostRanks(fp, {call.peer}, absl::StrCat("gloo: ", e.what()));
  }
  pending_sends_.push_back(std::move(send));
  ReapSends(kMaxPendingSends);
  return absl::OkStatus();
}

void GlooCommunicator::ReapSends(size_t keep) {
  while (pending_sends_.size() > keep) {
    PendingSend& oldest = pending_sends_.front();
    const absl::Time deadline = absl::Now() + config().timeout;
    try {
      Wait(*oldest.fingerprint_buffer, /*recv=*/false, 1, deadline);
      Wait(*oldest.data_buffer, /*recv=*/false, 1, deadline);
    } catch (...) {
      abandoned_.insert(abandoned_.end(),
                        {oldest.fingerprint, oldest.data, oldest.fingerprint_buffer, oldest.data_buffer});
      pending_sends_.pop_front();
      throw;
    }
    pending_sends_.pop_front();
  }
}

absl::Status GlooCommunicator::Run(const Call& call) {
  try {
    if (call.fp.kind == CollectiveKind::kSend) return PostSend(call);
  } catch (const std::exception& e) {  // an earlier send, reaped to make room, failed
    return absl::UnavailableError(absl::StrCat("in group '", name(), "' an earlier send failed: gloo: ", e.what()));
  }
  PDIST_RETURN_IF_ERROR(ExchangeFingerprints(call));
  try {
    return MoveData(call);
  } catch (const std::exception& e) {
    // Every rank passed the fingerprint exchange, so a failure here is a peer that died or
    // stalled mid-transfer; Gloo's message says which connection broke.
    const std::string what = e.what();
    if (absl::StrContains(absl::AsciiStrToLower(what), "timeout") || absl::StrContains(what, "Timed out")) {
      // Which peer Gloo does not say (its message names a connection): the candidates, by world rank.
      // Named when there is one; the first few otherwise (a 1,024-rank group listed them all).
      std::vector<int> others;
      for (int r = 0; r < size() && others.size() < 8; ++r) {
        if (r != rank()) others.push_back(r);
      }
      const std::string peers = others.size() == 1 ? absl::StrCat("rank ", WorldRanksOf(config(), others))
                                : size() - 1 > 8    ? absl::StrCat("one of ", size() - 1, " ranks: ", WorldRanksOf(config(), others), ", ...")
                                                    : absl::StrCat("one of ranks ", WorldRanksOf(config(), others));
      return absl::DeadlineExceededError(absl::StrCat(
          "timeout after ", absl::FormatDuration(config().timeout), " in group '", name(), "' during ",
          call.fp.ToString(), " (seq ", call.fp.seq, "): a peer stopped sending mid-collective (", peers,
          "; gloo: ", what, ")"));
    }
    return absl::UnavailableError(absl::StrCat("lost the connection in group '", name(), "' during ", call.fp.ToString(),
                                               " (seq ", call.fp.seq, "): a peer exited, crashed or stopped after an error of its own mid-collective (gloo: ",
                                               what, ")"));
  }
}

}  // namespace

absl::StatusOr<std::shared_ptr<Communicator>> CreateGlooCommunicator(const GlooRendezvous& rendezvous,
                                                                     int rank, int size, CommConfig config) {
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(absl::StrCat("gloo: rank ", rank, " is outside a world of ", size));
  }
  if (rendezvous.file_store_dir.empty() && rendezvous.master_addr.empty()) {
    return absl::InvalidArgumentError("gloo: no rendezvous: set a shared directory or a master address and port");
  }
  // Gloo writes to sockets without MSG_NOSIGNAL: a peer that died would kill this process with
  // SIGPIPE instead of producing an error. Ignore it, unless the program installed a handler.
  struct sigaction old {};
  if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) signal(SIGPIPE, SIG_IGN);
  std::shared_ptr<gloo::transport::Device> device;
  std::shared_ptr<gloo::rendezvous::Store> store;
  if (rendezvous.file_store_dir.empty()) {
    auto tcp = TcpStore::Create(rendezvous.master_addr, rendezvous.master_port, /*serve=*/rank == 0, config.timeout);
    if (!tcp.ok()) return tcp.status();
    store = *std::move(tcp);
  }
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = rendezvous.hostname;
    device = gloo::transport::tcp::CreateDevice(attr);
    if (store == nullptr) store = std::make_shared<gloo::rendezvous::FileStore>(rendezvous.file_store_dir);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("gloo: cannot open device on '", rendezvous.hostname,
                                               "' or store '", rendezvous.file_store_dir, "': ", e.what()));
  }
  return GlooCommunicator::Connect(std::move(store), std::move(device), rendezvous.prefix, rank, size,
                                   std::move(config));
}

absl::StatusOr<LaunchedWorld> LaunchedWorldFromEnv(const char* who) {
  auto env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v != nullptr ? v : "";
  };
  // The rank and world size as the launcher that started this process names them: torchrun's and
  // pdist-run's, Slurm's (srun), Open MPI's and other PMI launchers' (mpirun), in that order.
  LaunchedWorld world;
  bool found = false;
  for (const auto& [rank_var, size_var] : {std::pair{"RANK", "WORLD_SIZE"}, {"SLURM_PROCID", "SLURM_NTASKS"},
                                           {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}, {"PMI_RANK", "PMI_SIZE"}}) {
    if (env(rank_var).empty() && env(size_var).empty()) continue;
    if (!absl::SimpleAtoi(env(rank_var), &world.rank) || !absl::SimpleAtoi(env(size_var), &world.size) ||
        world.size < 1 || world.rank < 0 || world.rank >= world.size) {
      return absl::InvalidArgumentError(absl::StrCat(who, ": ", rank_var, "='", env(rank_var), "' and ", size_var, "='",
                                                     env(size_var), "' must be integers with 0 <= rank < size"));
    }
    found = true;
    break;
  }
  if (!found) {
    return absl::InvalidArgumentError(absl::StrCat(
        who, ": no rank in the environment: start the ranks with pdist-run (or torchrun), srun or mpirun, or set "
             "RANK and WORLD_SIZE"));
  }
  GlooRendezvous& rendezvous = world.rendezvous;
  rendezvous.file_store_dir = env("PDIST_RENDEZVOUS_DIR");
  if (!env("PDIST_RENDEZVOUS_PREFIX").empty()) rendezvous.prefix = env("PDIST_RENDEZVOUS_PREFIX");
  if (!env("PDIST_GLOO_HOSTNAME").empty()) rendezvous.hostname = env("PDIST_GLOO_HOSTNAME");
  rendezvous.master_addr = env("MASTER_ADDR");
  if (rendezvous.file_store_dir.empty()) {
    if (rendezvous.master_addr.empty() || !absl::SimpleAtoi(env("MASTER_PORT"), &rendezvous.master_port)) {
      return absl::InvalidArgumentError(absl::StrCat(
          who, ": set MASTER_ADDR and MASTER_PORT (rank 0 serves a TCP store there) or PDIST_RENDEZVOUS_DIR "
               "(a directory every rank can see); got MASTER_ADDR='",
          env("MASTER_ADDR"), "', MASTER_PORT='", env("MASTER_PORT"), "'"));
    }
  }
  return world;
}

absl::StatusOr<std::shared_ptr<Communicator>> CreateGlooCommunicatorFromEnv(CommConfig config) {
  PDIST_ASSIGN_OR_RETURN(LaunchedWorld world, LaunchedWorldFromEnv("gloo"));
  return CreateGlooCommunicator(world.rendezvous, world.rank, world.size, std::move(config));
}

namespace {

// Rank 0's TCP store seen as a KeyValueStore, its keys under a prefix. Gloo's stores throw; the
// errors become statuses here, a timeout told apart from a lost connection. TcpStore serialises
// each request and polls while it waits, so the watchdog and a thread waiting for a sub-group's
// id share it without holding each other up.
class TcpKeyValueStore final : public KeyValueStore {
 public:
  TcpKeyValueStore(std::shared_ptr<TcpStore> store, std::string prefix)
      : store_(std::move(store)), prefix_(std::move(prefix)) {}

  absl::Status Set(const std::string& key, const std::string& value) override {
    try {
      store_->set(Key(key), std::vector<char>(value.begin(), value.end()));
      return absl::OkStatus();
    } catch (const std::exception& e) {
      return absl::UnavailableError(absl::StrCat("store: setting '", key, "': ", e.what()));
    }
  }

  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override {
    try {
      const int64_t ms = timeout == absl::InfiniteDuration() ? int64_t{1} << 40 : absl::ToInt64Milliseconds(timeout);
      store_->wait({Key(key)}, std::chrono::milliseconds(ms));
      const std::vector<char> value = store_->get(Key(key));
      return std::string(value.begin(), value.end());
    } catch (const std::exception& e) {
      const std::string what = e.what();
      if (absl::StrContains(absl::AsciiStrToLower(what), "timeout") ||
          absl::StrContains(absl::AsciiStrToLower(what), "timed out")) {
        return absl::DeadlineExceededError(absl::StrCat("store: no rank set '", key, "' within ",
                                                        absl::FormatDuration(timeout), " (", what, ")"));
      }
      return absl::UnavailableError(absl::StrCat("store: reading '", key, "': ", what));
    }
  }

  absl::StatusOr<std::optional<std::string>> TryGet(const std::string& key) override {
    absl::StatusOr<std::string> value = Get(key, absl::Milliseconds(1));
    if (absl::IsDeadlineExceeded(value.status())) return std::nullopt;
    if (!value.ok()) return value.status();
    return *std::move(value);
  }

 private:
  std::string Key(const std::string& key) const { return absl::StrCat(prefix_, "/", key); }

  std::shared_ptr<TcpStore> store_;
  std::string prefix_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<KeyValueStore>> OpenKeyValueStore(const GlooRendezvous& rendezvous, int rank,
                                                                 absl::Duration timeout) {
  if (!rendezvous.file_store_dir.empty()) {
    return std::make_shared<DirectoryStore>(rendezvous.file_store_dir, rendezvous.prefix);
  }
  PDIST_ASSIGN_OR_RETURN(std::shared_ptr<TcpStore> store,
                         TcpStore::Create(rendezvous.master_addr, rendezvous.master_port, rank == 0, timeout));
  return std::make_shared<TcpKeyValueStore>(std::move(store), rendezvous.prefix);
}

}  // namespace pdist::exec::comm
