// NcclCommunicator: rendezvous through the store, transfers enqueued on streams, a watchdog for
// deadlines and asynchronous errors.
#include "executor/cuda/nccl_communicator.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "executor/cuda/cuda_backend.h"
#include "executor/cuda/cuda_status.h"
#include "executor/cuda/cuda_stream.h"
#include "ir/status.h"

namespace pdist::exec::cuda {
namespace {

using comm::CollectiveKind;
using comm::ReduceOp;

// How often the watchdog looks at the transfers in flight, and posts this rank's progress.
constexpr auto kWatchInterval = std::chrono::milliseconds(100);
constexpr absl::Duration kPostInterval = absl::Seconds(1);

absl::Status NcclStatus(ncclResult_t result, const char* call) {
  if (result == ncclSuccess || result == ncclInProgress) return absl::OkStatus();
  const std::string message = absl::StrCat(call, ": ", ncclGetErrorString(result), " (", ncclGetLastError(nullptr), ")");
  if (result == ncclSystemError || result == ncclRemoteError) return absl::UnavailableError(message);
  if (result == ncclInvalidArgument || result == ncclInvalidUsage) return absl::InvalidArgumentError(message);
  return absl::InternalError(message);
}

#define PDIST_NCCL_RETURN_IF_ERROR(call)                                                         \
  do {                                                                                           \
    if (absl::Status pdist_nccl_status_ = NcclStatus((call), #call); !pdist_nccl_status_.ok()) { \
      return pdist_nccl_status_;                                                                 \
    }                                                                                            \
  } while (false)

absl::StatusOr<ncclDataType_t> NcclTypeOf(ir::DataType dtype) {
  switch (dtype) {
    case ir::DataType::kFloat32: return ncclFloat32;
    case ir::DataType::kFloat64: return ncclFloat64;
    case ir::DataType::kBFloat16: return ncclBfloat16;
    case ir::DataType::kFloat16: return ncclFloat16;
    case ir::DataType::kInt32: return ncclInt32;
    case ir::DataType::kInt64: return ncclInt64;
    case ir::DataType::kBool: return ncclUint8;
  }
  return absl::InvalidArgumentError(absl::StrCat("NCCL cannot move ", ir::DataTypeName(dtype)));
}

ncclRedOp_t NcclOpOf(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kAvg: return ncclAvg;
    case ReduceOp::kMax: return ncclMax;
  }
  return ncclSum;
}

std::string IdKey(const std::string& group) { return absl::StrCat("nccl/", group, "/id"); }

// NCCL's thread safety: no two threads may call into one communicator at once, nor into two
// communicators of one device. The watchdog polls and aborts beside the rank's own calls (a poll
// of a non-blocking communicator completes and frees its pending group job: two at once free it
// twice), so every NCCL call on a device holds that device's lock. Held per call, never across
// a wait: a non-blocking call returns at once.
std::mutex& CallLockOf(int device) {
  static std::mutex mu;
  static auto* locks = new std::map<int, std::unique_ptr<std::mutex>>();  // for the process's life
  std::lock_guard<std::mutex> lock(mu);
  std::unique_ptr<std::mutex>& call = (*locks)[device];
  if (!call) call = std::make_unique<std::mutex>();
  return *call;
}

}  // namespace

template <typename Fn>
ncclResult_t NcclCommunicator::Locked(Fn&& call) {
  std::lock_guard<std::mutex> lock(CallLockOf(device_.index));
  return call();
}

NcclCommunicator::NcclCommunicator(std::shared_ptr<comm::KeyValueStore> store, int rank, int size, Device device,
                                   comm::CommConfig config)
    : Communicator(rank, size, config), store_(std::move(store)), device_(device),
      board_(store_, config.name, rank, size) {}

absl::StatusOr<std::shared_ptr<NcclCommunicator>> NcclCommunicator::Create(std::shared_ptr<comm::KeyValueStore> store,
                                                                           int rank, int size, Device device,
                                                                           comm::CommConfig config) {
  if (device.is_cpu()) {
    return absl::InvalidArgumentError(absl::StrCat("NCCL runs on GPUs, not on ", device.ToString()));
  }
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(absl::StrCat("NCCL group '", config.name, "': rank ", rank, " of ", size));
  }
  const absl::Duration timeout = config.timeout;
  std::shared_ptr<NcclCommunicator> comm(new NcclCommunicator(store, rank, size, device, std::move(config)));
  ncclUniqueId id;
  const std::string key = IdKey(comm->name());
  if (rank == 0) {
    PDIST_NCCL_RETURN_IF_ERROR(ncclGetUniqueId(&id));
    PDIST_RETURN_IF_ERROR(store->Set(key, std::string(id.internal, sizeof(id.internal))));
  } else {
    absl::StatusOr<std::string> posted = store->Get(key, timeout);
    if (!posted.ok()) {
      const comm::CommConfig& group = comm->config();  // `config` was moved into it
      return WithContext(posted.status(), absl::StrCat("rank ", comm::WorldRankOf(group, rank), " waiting for rank ",
                                                       comm::WorldRankOf(group, 0), "'s NCCL id for group '", group.name, "'"));
    }
    if (posted->size() != sizeof(id.internal)) {
      return absl::InternalError(absl::StrCat("store key '", key, "' holds ", posted->size(), " bytes, not an NCCL id"));
    }
    std::memcpy(id.internal, posted->data(), sizeof(id.internal));
  }
  const std::string group = absl::StrCat("NCCL group '", comm->name(), "'");
  PDIST_RETURN_IF_ERROR(WithContext(comm->Join(id), group));
  comm->watchdog_ = std::thread([raw = comm.get()] { raw->Watch(); });
  return comm;
}

absl::Status NcclCommunicator::Join(const ncclUniqueId& id) {
  PDIST_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_.index));
  PDIST_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&own_stream_, cudaStreamNonBlocking));
  PDIST_CUDA_RETURN_IF_ERROR(cudaMalloc(&scratch_, sizeof(float)));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  // Non-blocking: a call that cannot complete (a missing peer) returns, so the watchdog can abort.
  config.blocking = 0;
  const ncclResult_t started = Locked([&] { return ncclCommInitRankConfig(&comm_, size(), id, rank(), &config); });
  // Initialisation completes asynchronously: wait for it up to the group's deadline.
  absl::Status joined = Settle(started, "ncclCommInitRankConfig", absl::Now() + this->config().timeout);
  if (absl::IsDeadlineExceeded(joined)) {
    joined = absl::DeadlineExceededError(absl::StrCat("timeout after ", absl::FormatDuration(this->config().timeout),
                                                      " joining: not every rank of ", size(), " arrived"));
  }
  if (!joined.ok()) AbortOnce();
  return joined;
}

absl::Status NcclCommunicator::Settle(ncclResult_t result, const char* call, absl::Time deadline) {
  // A non-blocking communicator may answer ncclInProgress: the call is not done (not even
  // enqueued) until the communicator's state says so.
  while (result == ncclInProgress) {
    if (comm_ == nullptr || abort_requested_) {
      return absl::AbortedError(absl::StrCat(call, ": the communicator was aborted"));
    }
    if (absl::Now() > deadline) return absl::DeadlineExceededError(absl::StrCat(call, " did not complete"));
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    if (ncclResult_t polled = Locked([&] { return ncclCommGetAsyncError(comm_, &result); }); polled != ncclSuccess) {
      result = polled;
    }
  }
  return NcclStatus(result, call);
}

void NcclCommunicator::AbortOnce() {
  // ncclCommAbort frees the communicator: it waits for every call that holds comm_mu_ (each is
  // short: the communicator does not block), and no call uses the handle once aborted_ is set.
  abort_requested_ = true;  // a call waiting in Settle gives up and releases its shared lock
  std::unique_lock<std::shared_mutex> lock(comm_mu_);
  if (comm_ != nullptr && !aborted_.exchange(true)) {
    Locked([&] { return ncclCommAbort(comm_); });
    comm_ = nullptr;
  }
}

NcclCommunicator::~NcclCommunicator() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  cudaSetDevice(device_.index);
  for (const InFlight& f : in_flight_) cudaEventDestroy(f.done);
  if (comm_ != nullptr && !aborted_ && !AsyncError().ok()) AbortOnce();  // a failed one cannot finalise
  if (comm_ != nullptr && !aborted_) {  // an aborted one is gone already
    // Finalising waits for the peers' last operations: up to the deadline, then abort.
    const absl::Status finalized =
        Settle(Locked([&] { return ncclCommFinalize(comm_); }), "ncclCommFinalize", absl::Now() + config().timeout);
    if (finalized.ok()) {
      Locked([&] { return ncclCommDestroy(comm_); });
    } else {
      AbortOnce();
    }
  }
  if (scratch_ != nullptr) cudaFree(scratch_);
  if (own_stream_ != nullptr) cudaStreamDestroy(own_stream_);
}

absl::Status NcclCommunicator::CheckReduction(ir::DataType dtype, ReduceOp op) const {
  const bool floating = ir::IsFloatingPoint(dtype);
  if ((floating || dtype == ir::DataType::kInt32 || dtype == ir::DataType::kInt64) &&
      (floating || op != ReduceOp::kAvg)) {
    return absl::OkStatus();
  }
  return absl::UnimplementedError(absl::StrCat("reduction ", comm::ReduceOpName(op), " is not defined for ",
                                               ir::DataTypeName(dtype), " (f32, f64, bf16, f16; i32, i64 for sum and max)"));
}

absl::Status NcclCommunicator::Enqueue(const Call& call, const void* in, void* out, cudaStream_t stream) {
  const comm::Fingerprint& fp = call.fp;
  if (fp.kind == CollectiveKind::kBarrier) {
    return Settle(Locked([&] { return ncclAllReduce(scratch_, scratch_, 1, ncclFloat32, ncclSum, comm_, stream); }),
                  "ncclAllReduce (barrier)", call.deadline);
  }
  PDIST_ASSIGN_OR_RETURN(ncclDataType_t type, NcclTypeOf(fp.dtype));
  const size_t count = static_cast<size_t>(fp.count);  // the per-rank input's elements (Recv: the output's)
  switch (fp.kind) {
    case CollectiveKind::kAllReduce:
      return Settle(Locked([&] { return ncclAllReduce(in, out, count, type, NcclOpOf(fp.reduce), comm_, stream); }),
                    "ncclAllReduce", call.deadline);
    case CollectiveKind::kAllGather:
      return Settle(Locked([&] { return ncclAllGather(in, out, count, type, comm_, stream); }), "ncclAllGather",
                    call.deadline);
    case CollectiveKind::kReduceScatter:
      return Settle(Locked([&] {
                      return ncclReduceScatter(in, out, count / static_cast<size_t>(size()), type, NcclOpOf(fp.reduce),
                                               comm_, stream);
                    }),
                    "ncclReduceScatter", call.deadline);
    case CollectiveKind::kBroadcast:
      return Settle(Locked([&] { return ncclBroadcast(in, out, count, type, fp.root, comm_, stream); }),
                    "ncclBroadcast", call.deadline);
    case CollectiveKind::kSend:
      return Settle(Locked([&] { return ncclSend(in, count, type, call.peer, comm_, stream); }), "ncclSend",
                    call.deadline);
    case CollectiveKind::kRecv:
      return Settle(Locked([&] { return ncclRecv(out, count, type, call.peer, comm_, stream); }), "ncclRecv",
                    call.deadline);
    case CollectiveKind::kAllToAll: {
      // NCCL has no all-to-all: a send and a receive per peer, grouped into one launch.
      const size_t piece = count / static_cast<size_t>(size());
      const size_t bytes = piece * static_cast<size_t>(ir::DataTypeSize(fp.dtype));
      // The whole group under the call lock: its calls are one thread's, and none waits.
      absl::Status posted = absl::OkStatus();
      const ncclResult_t ended = Locked([&] {
        if (ncclResult_t started = ncclGroupStart(); started != ncclSuccess) return started;
        for (int peer = 0; peer < size() && posted.ok(); ++peer) {
          posted = NcclStatus(ncclSend(static_cast<const char*>(in) + peer * bytes, piece, type, peer, comm_, stream),
                              "ncclSend (all_to_all)");
          if (posted.ok()) {
            posted = NcclStatus(ncclRecv(static_cast<char*>(out) + peer * bytes, piece, type, peer, comm_, stream),
                                "ncclRecv (all_to_all)");
          }
        }
        return ncclGroupEnd();  // always closes the group, even after a failed post
      });
      PDIST_RETURN_IF_ERROR(posted);
      return Settle(ended, "ncclGroupEnd (all_to_all)", call.deadline);
    }
    case CollectiveKind::kBarrier:
      break;
  }
  return absl::InternalError(absl::StrCat("NCCL: no transfer for ", fp.ToString()));
}

absl::Status NcclCommunicator::EnqueueGuarded(const Call& call, const void* in, void* out, cudaStream_t stream) {
  {
    // Started, for the progress board, before it can hang: peers then see this rank reached it.
    std::lock_guard<std::mutex> lock(mu_);
    latest_ = call.fp;
    latest_posted_ = false;
  }
  absl::Status status;
  {
    std::shared_lock<std::shared_mutex> lock(comm_mu_);  // the handle stays valid meanwhile
    if (aborted_ || abort_requested_) {
      return absl::AbortedError(absl::StrCat("NCCL communicator '", name(), "' was aborted"));
    }
    status = Enqueue(call, in, out, stream);
  }
  if (!status.ok()) {
    // A call that did not settle (a peer missing while connecting) or a half-posted group is
    // still in NCCL's hands: abort, so that it ends and the peers fail too.
    RecordError(status);
    AbortOnce();
  }
  return status;
}

absl::Status NcclCommunicator::Run(const Call& call) {
  if (aborted_) return absl::AbortedError(absl::StrCat("NCCL communicator '", name(), "' was aborted"));
  const Tensor* data = call.in != nullptr ? call.in : call.out;
  const bool on_host = data == nullptr || data->device().is_cpu();
  if (on_host) return RunStaged(call);
  if (data->device() != device_) {
    return absl::InvalidArgumentError(absl::StrCat(call.fp.ToString(), ": a tensor on ", data->device().ToString(),
                                                   ", the communicator is on ", device_.ToString()));
  }
  PDIST_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_.index));
  auto* given = dynamic_cast<CudaStream*>(call.stream);
  const cudaStream_t stream = given != nullptr ? given->handle() : own_stream_;
  if (given == nullptr) PDIST_RETURN_IF_ERROR(WaitForCompute(own_stream_));
  PDIST_RETURN_IF_ERROR(EnqueueGuarded(call, call.in != nullptr ? call.in->raw() : nullptr,
                                       call.out != nullptr ? call.out->raw() : nullptr, stream));
  PDIST_RETURN_IF_ERROR(Track(call, stream));
  if (given != nullptr) return absl::OkStatus();  // ordered on the caller's stream
  return Synchronize(call, stream);
}

// Without a stream, device tensors were made on the device's compute stream (a kernel outside a
// step, a copy without a stream): `stream` waits for what is enqueued there so far.
absl::Status NcclCommunicator::WaitForCompute(cudaStream_t stream) {
  PDIST_ASSIGN_OR_RETURN(Backend * backend, BackendFor(device_));
  auto* cuda = dynamic_cast<CudaBackend*>(backend);
  if (cuda == nullptr) return absl::InternalError(absl::StrCat(device_.ToString(), " has no CUDA backend"));
  cudaEvent_t ready = nullptr;
  PDIST_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  absl::Status status = CudaStatus(cudaEventRecord(ready, cuda->compute_stream(device_)), "cudaEventRecord");
  if (status.ok()) status = CudaStatus(cudaStreamWaitEvent(stream, ready, 0), "cudaStreamWaitEvent");
  cudaEventDestroy(ready);  // released once the wait is done
  return status;
}

absl::Status NcclCommunicator::RunStaged(const Call& call) {
  PDIST_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_.index));
  void* in = nullptr;
  void* out = nullptr;
  const int64_t in_bytes = call.in != nullptr ? call.in->num_bytes() : 0;
  const int64_t out_bytes = call.out != nullptr ? call.out->num_bytes() : 0;
  // In place (broadcast; an all-reduce given one tensor twice) stays in place on the device.
  const bool same = call.in != nullptr && call.out != nullptr && call.in->raw() == call.out->raw();
  if (in_bytes > 0) PDIST_CUDA_RETURN_IF_ERROR(cudaMallocAsync(&in, static_cast<size_t>(in_bytes), own_stream_));
  if (out_bytes > 0 && !same) PDIST_CUDA_RETURN_IF_ERROR(cudaMallocAsync(&out, static_cast<size_t>(out_bytes), own_stream_));
  if (same) out = in;
  absl::Status status = absl::OkStatus();
  if (in_bytes > 0) {
    status = CudaStatus(cudaMemcpyAsync(in, call.in->raw(), static_cast<size_t>(in_bytes), cudaMemcpyHostToDevice,
                                        own_stream_),
                        "cudaMemcpyAsync (staging in)");
  }
  if (status.ok()) status = EnqueueGuarded(call, in, out, own_stream_);
  if (status.ok()) status = Track(call, own_stream_);
  if (status.ok() && out_bytes > 0) {
    status = CudaStatus(cudaMemcpyAsync(call.out->raw(), out, static_cast<size_t>(out_bytes), cudaMemcpyDeviceToHost,
                                        own_stream_),
                        "cudaMemcpyAsync (staging out)");
  }
  if (status.ok()) status = Synchronize(call, own_stream_);
  // After a failure the transfer may still touch the buffers: they are left to the aborted
  // communicator rather than freed under it.
  if (in != nullptr && status.ok()) cudaFreeAsync(in, own_stream_);
  if (out != nullptr && !same && status.ok()) cudaFreeAsync(out, own_stream_);
  return status;
}

absl::Status NcclCommunicator::Synchronize(const Call& call, cudaStream_t stream) {
  cudaEvent_t done = nullptr;
  PDIST_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  absl::Status status = CudaStatus(cudaEventRecord(done, stream), "cudaEventRecord");
  while (status.ok()) {
    const cudaError_t query = Unlatched(cudaEventQuery(done));
    if (query == cudaSuccess) break;
    if (query != cudaErrorNotReady) {
      status = CudaStatus(query, "cudaEventQuery");
    } else if (absl::Status sticky = AsyncError(); !sticky.ok()) {
      status = sticky;  // the watchdog's verdict: missing ranks, a mismatch, NCCL's own error
    } else if (aborted_) {
      status = absl::AbortedError(absl::StrCat("NCCL communicator '", name(), "' was aborted"));
    } else if (absl::Now() > call.deadline + 4 * kPostInterval) {  // the watchdog had its chance
      status = comm::MissingRanks(call.fp, config().timeout, {}, "the watchdog did not report");
      RecordError(status);
      AbortOnce();  // the transfer must not outlive the call that gave up on it
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  if (status.ok()) cudaEventDestroy(done);  // a pending event is left to the aborted stream
  return status;
}

absl::Status NcclCommunicator::Track(const Call& call, cudaStream_t stream) {
  InFlight f{call.fp, call.peer, call.deadline, nullptr};
  PDIST_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&f.done, cudaEventDisableTiming));
  if (absl::Status recorded = CudaStatus(cudaEventRecord(f.done, stream), "cudaEventRecord"); !recorded.ok()) {
    cudaEventDestroy(f.done);
    return recorded;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    in_flight_.push_back(f);
  }
  wake_.notify_all();
  return absl::OkStatus();
}

void NcclCommunicator::Watch() {
  cudaSetDevice(device_.index);
  absl::Time last_post = absl::InfinitePast();
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    wake_.wait_for(lock, kWatchInterval);
    if (stop_) break;
    // Retire what has completed, in order.
    while (!in_flight_.empty() && Unlatched(cudaEventQuery(in_flight_.front().done)) == cudaSuccess) {
      cudaEventDestroy(in_flight_.front().done);
      in_flight_.pop_front();
    }
    ncclResult_t async = ncclSuccess;
    {
      std::shared_lock<std::shared_mutex> comm_lock(comm_mu_);
      if (!aborted_) Locked([&] { return ncclCommGetAsyncError(comm_, &async); });
    }
    {
      if (async != ncclSuccess && async != ncclInProgress) {
        RecordError(NcclStatus(async, absl::StrCat("NCCL group '", name(), "' (asynchronous error)").c_str()));
        AbortOnce();
      }
    }
    // Post progress off the hot path: a copy of the latest fingerprint, the store call unlocked.
    if (latest_ && !latest_posted_ && absl::Now() - last_post >= kPostInterval) {
      const comm::Fingerprint latest = *latest_;
      latest_posted_ = true;
      last_post = absl::Now();
      lock.unlock();
      board_.Post(latest).IgnoreError();  // best effort: a lost post only weakens a diagnosis
      lock.lock();
    }
    if (!aborted_ && !in_flight_.empty() && absl::Now() > in_flight_.front().deadline) {
      const InFlight stuck = in_flight_.front();
      lock.unlock();
      Expire(stuck);
      lock.lock();
    }
  }
}

void NcclCommunicator::Expire(const InFlight& stuck) {
  std::optional<comm::Fingerprint> latest;
  {
    std::lock_guard<std::mutex> lock(mu_);
    latest = latest_;
  }
  // Our own latest first, so that peers diagnosing at the same time see where we are.
  if (latest) board_.Post(*latest).IgnoreError();
  std::this_thread::sleep_for(absl::ToChronoMilliseconds(2 * kPostInterval));  // the peers' next posts
  if (Unlatched(cudaEventQuery(stuck.done)) == cudaSuccess) return;  // late, but done: the watchdog retires it
  RecordError(board_.Diagnose(stuck.fp, config().timeout, stuck.peer));
  AbortOnce();  // the transfers in flight end; later calls fail with the sticky error
  wake_.notify_all();
}

void NcclCommunicator::AbortBackend() {
  AbortOnce();
  wake_.notify_all();
}

absl::StatusOr<std::shared_ptr<comm::Communicator>> NcclCommunicator::CreateSubgroup(const std::vector<int>& members,
                                                                                     comm::CommConfig config) {
  const auto me = std::find(members.begin(), members.end(), rank());
  if (me == members.end()) {
    return absl::InternalError(absl::StrCat("rank ", rank(), " asked to join '", config.name, "' it is not a member of"));
  }
  PDIST_ASSIGN_OR_RETURN(std::shared_ptr<NcclCommunicator> sub,
                         Create(store_, static_cast<int>(me - members.begin()), static_cast<int>(members.size()),
                                device_, std::move(config)));
  return std::shared_ptr<comm::Communicator>(std::move(sub));
}

}  // namespace pdist::exec::cuda
