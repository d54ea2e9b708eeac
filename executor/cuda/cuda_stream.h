// The CUDA backend's streams and events (executor/stream.h).
//
// A CudaStream wraps a cudaStream_t that the backend owns for the process's life (one compute
// and one communication stream per device), so a block freed after its run ended is still
// ordered on a live stream. Submit runs the host part of the work at once — it enqueues device
// work on the stream — and records a cudaEvent after it; the work function, and every tensor it
// captured, is kept until that event has fired, so a buffer a collective still reads is not
// freed under it. WaitFor is cudaStreamWaitEvent: the host never blocks for a dependency.
#pragma once

#include <cuda_runtime.h>

#include <deque>
#include <functional>
#include <memory>
#include <mutex>

#include "executor/stream.h"

namespace pdist::exec::cuda {

class CudaEvent final : public Event {
 public:
  // `host_status`: how the host part went (its enqueueing); a failed one has no device event.
  CudaEvent(absl::Status host_status, cudaEvent_t event) : host_status_(std::move(host_status)), event_(event) {}
  ~CudaEvent() override;
  absl::Status Wait() override;
  bool done() const override;
  cudaEvent_t handle() const { return event_; }
  const absl::Status& host_status() const { return host_status_; }

 private:
  absl::Status host_status_;
  cudaEvent_t event_ = nullptr;
};

// A cudaEvent recorded with timing; SecondsSince is cudaEventElapsedTime (resolution about half a
// microsecond). Both marks must be of one device.
class CudaTimeMark final : public TimeMark {
 public:
  // `status`: why no event was recorded (the stream had failed), or OK with `event`.
  CudaTimeMark(absl::Status status, cudaEvent_t event) : status_(std::move(status)), event_(event) {}
  ~CudaTimeMark() override;
  absl::StatusOr<double> SecondsSince(const TimeMark& earlier) const override;
  absl::Status Wait() const override;

 private:
  absl::Status status_;
  cudaEvent_t event_ = nullptr;
};

class CudaStream final : public Stream {
 public:
  CudaStream(Device device, cudaStream_t handle) : device_(device), handle_(handle) {}
  ~CudaStream() override;  // synchronises, then releases what the work captured

  Device device() const override { return device_; }
  cudaStream_t handle() const { return handle_; }
  std::shared_ptr<Event> Submit(std::function<absl::Status()> work) override;
  std::shared_ptr<Event> Record() override;
  absl::Status WaitFor(const std::shared_ptr<Event>& event) override;
  std::shared_ptr<TimeMark> MarkTime() override;
  absl::Status Synchronize() override;
  absl::Status AwaitDeviceWork() override;

 private:
  std::shared_ptr<CudaEvent> RecordAfter(absl::Status host_status);
  // Drops the work functions whose events have fired, in order, stopping at a failed one (it
  // stays until Synchronize: its device event was never recorded).
  void ReleaseFinished();

  Device device_;
  cudaStream_t handle_;
  std::mutex mu_;
  absl::Status first_error_;
  std::deque<std::pair<std::shared_ptr<CudaEvent>, std::function<absl::Status()>>> in_flight_;
};

}  // namespace pdist::exec::cuda
