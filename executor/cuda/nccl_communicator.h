// NcclCommunicator: the Communicator over NCCL, one rank per GPU (issue 15's item 3).
//
//   auto store = ...;  // the job's rendezvous (executor/comm/kv_store.h)
//   PDIST_ASSIGN_OR_RETURN(auto world, NcclCommunicator::Create(store, rank, size, Device::Cuda(local), {}));
//   PDIST_RETURN_IF_ERROR(world->AllReduce(grad, grad, ReduceOp::kSum, comm_stream));  // enqueued
//
// Rank 0 of a group makes NCCL's unique id and posts it to the store under
// "nccl/<group name>/id"; every member then joins. Sub-groups (Split) are new communicators over
// their members, each with its own id, so ranks outside a group never take part in making it.
//
// Device tensors: the transfer is enqueued on the given stream and the call returns; work after
// it on that stream sees the result. Without a stream it runs on the communicator's own, after
// what the device's compute stream holds so far (where tensors made outside a step are made),
// and the call waits for it. Host
// tensors (a checkpoint's gather, Split's exchange) are staged through device buffers and the
// call waits for them. The base class numbers and fingerprints every collective as it does for
// the other backends; NCCL itself exchanges only data, so a watchdog thread
//   - posts this rank's latest started collective to the store about once a second
//     (executor/comm/progress_board.h),
//   - retires transfers whose events have fired, and reads ncclCommGetAsyncError,
//   - when the oldest transfer passes its deadline, reads the other ranks' posts to name the
//     ones that never started it (or the mismatch), records that as the sticky error and
//     aborts the communicator (ncclCommAbort), so that no rank hangs.
// Point to point: NCCL pairs sends and receives between two ranks in issue order; a send waits
// on its stream until the receive is posted (not buffered as the host backends' are), so the
// executor sends over a channel per direction (Communicator::Channel), each on a stream of its
// own (docs/communicators.md).
#pragma once

#include <nccl.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <thread>

#include "executor/comm/communicator.h"
#include "executor/comm/kv_store.h"
#include "executor/comm/progress_board.h"
#include "executor/device.h"

namespace pdist::exec::cuda {

class NcclCommunicator final : public comm::Communicator {
 public:
  // Collective over the `size` ranks sharing `store`; `device` is this rank's GPU.
  static absl::StatusOr<std::shared_ptr<NcclCommunicator>> Create(std::shared_ptr<comm::KeyValueStore> store, int rank,
                                                                  int size, Device device, comm::CommConfig config);
  ~NcclCommunicator() override;

 protected:
  absl::Status Run(const Call& call) override;
  absl::StatusOr<std::shared_ptr<comm::Communicator>> CreateSubgroup(const std::vector<int>& members,
                                                                     comm::CommConfig config) override;
  void AbortBackend() override;
  absl::Status CheckReduction(ir::DataType dtype, comm::ReduceOp op) const override;

 private:
  // A transfer in flight, until its event fires.
  struct InFlight {
    comm::Fingerprint fp;
    int peer = -1;
    absl::Time deadline;
    cudaEvent_t done = nullptr;
  };

  NcclCommunicator(std::shared_ptr<comm::KeyValueStore> store, int rank, int size, Device device,
                   comm::CommConfig config);
  absl::Status Join(const ncclUniqueId& id);
  // Enqueues the NCCL calls of `call` on `stream` for device buffers `in` and `out`: Enqueue
  // itself, and EnqueueGuarded, which holds the handle against an abort meanwhile.
  absl::Status Enqueue(const Call& call, const void* in, void* out, cudaStream_t stream);
  absl::Status EnqueueGuarded(const Call& call, const void* in, void* out, cudaStream_t stream);
  // `result` of `call` once it is no longer in progress (a non-blocking communicator's calls
  // may return before they are done), waiting up to `deadline`.
  absl::Status Settle(ncclResult_t result, const char* call, absl::Time deadline);
  // Runs `call` on host tensors through device buffers, waiting for it.
  absl::Status RunStaged(const Call& call);
  // Tracks the transfer just enqueued on `stream` for the watchdog.
  absl::Status Track(const Call& call, cudaStream_t stream);
  // Blocks until `stream`'s work so far is done, the communicator fails, or `call`'s deadline
  // (and the watchdog's verdict) passes.
  absl::Status Synchronize(const Call& call, cudaStream_t stream);
  // ncclCommAbort, once.
  void AbortOnce();
  void Watch();
  // The watchdog's verdict on the oldest transfer, once past its deadline.
  void Expire(const InFlight& stuck);
  absl::Status WaitForCompute(cudaStream_t stream);
  // Makes one NCCL call under its device's call lock (nccl_communicator.cc: NCCL's thread safety).
  template <typename Fn>
  ncclResult_t Locked(Fn&& call);

  std::shared_ptr<comm::KeyValueStore> store_;
  Device device_;
  comm::ProgressBoard board_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t own_stream_ = nullptr;  // staged host transfers
  void* scratch_ = nullptr;            // barrier's one element

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<InFlight> in_flight_;
  std::optional<comm::Fingerprint> latest_;  // last started, for the board
  bool latest_posted_ = true;
  // Calls on comm_ hold it shared; ncclCommAbort (which frees comm_) holds it exclusively. Each
  // NCCL call also holds its device's call lock, taken after this one (Locked).
  std::shared_mutex comm_mu_;
  std::atomic<bool> abort_requested_{false};  // waiting calls give up
  std::atomic<bool> aborted_{false};          // comm_ is gone
  bool stop_ = false;
  std::thread watchdog_;
};

}  // namespace pdist::exec::cuda
