// CudaStream and CudaEvent.
#include "executor/cuda/cuda_stream.h"

#include "executor/cuda/cuda_status.h"
#include "ir/status.h"

namespace pdist::exec::cuda {

CudaEvent::~CudaEvent() {
  if (event_ != nullptr) cudaEventDestroy(event_);
}

absl::Status CudaEvent::Wait() {
  if (!host_status_.ok() || event_ == nullptr) return host_status_;
  return CudaStatus(cudaEventSynchronize(event_), "cudaEventSynchronize");
}

bool CudaEvent::done() const {
  return !host_status_.ok() || event_ == nullptr || Unlatched(cudaEventQuery(event_)) != cudaErrorNotReady;
}

CudaTimeMark::~CudaTimeMark() {
  if (event_ != nullptr) cudaEventDestroy(event_);
}

absl::StatusOr<double> CudaTimeMark::SecondsSince(const TimeMark& earlier) const {
  const auto* from = dynamic_cast<const CudaTimeMark*>(&earlier);
  if (from == nullptr) return absl::InvalidArgumentError("time marks of two clocks (a GPU's and the host's)");
  // Elapsed time is only defined once both events have completed.
  PDIST_RETURN_IF_ERROR(from->Wait());
  PDIST_RETURN_IF_ERROR(Wait());
  float ms = 0;
  PDIST_RETURN_IF_ERROR(CudaStatus(cudaEventElapsedTime(&ms, from->event_, event_), "cudaEventElapsedTime"));
  return static_cast<double>(ms) / 1e3;
}

absl::Status CudaTimeMark::Wait() const {
  PDIST_RETURN_IF_ERROR(status_);
  return CudaStatus(cudaEventSynchronize(event_), "cudaEventSynchronize");
}

CudaStream::~CudaStream() {
  Synchronize().IgnoreError();  // the handle is the backend's: it stays
}

std::shared_ptr<CudaEvent> CudaStream::RecordAfter(absl::Status host_status) {
  if (!host_status.ok()) return std::make_shared<CudaEvent>(std::move(host_status), nullptr);
  cudaEvent_t event = nullptr;
  absl::Status status = CudaStatus(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
  if (status.ok()) status = CudaStatus(cudaEventRecord(event, handle_), "cudaEventRecord");
  if (!status.ok() && event != nullptr) {
    cudaEventDestroy(event);
    event = nullptr;
  }
  return std::make_shared<CudaEvent>(std::move(status), event);
}

void CudaStream::ReleaseFinished() {
  // A failed submission's event has no device event to ask, yet part of its work may be
  // enqueued already: it stays, and everything after it, until Synchronize waits for the stream.
  while (!in_flight_.empty() && in_flight_.front().first->host_status().ok() && in_flight_.front().first->done()) {
    in_flight_.pop_front();
  }
}

std::shared_ptr<Event> CudaStream::Submit(std::function<absl::Status()> work) {
  std::lock_guard<std::mutex> lock(mu_);
  ReleaseFinished();
  absl::Status status = first_error_.ok() ? work() : first_error_;
  if (first_error_.ok()) first_error_ = status;
  std::shared_ptr<CudaEvent> event = RecordAfter(std::move(status));
  if (!event->host_status().ok() && first_error_.ok()) first_error_ = event->host_status();
  in_flight_.emplace_back(event, std::move(work));
  return event;
}

std::shared_ptr<Event> CudaStream::Record() {
  std::lock_guard<std::mutex> lock(mu_);
  ReleaseFinished();  // a lane's last work item (its last send's tensor) need not wait for its next Submit
  return RecordAfter(first_error_);
}

absl::Status CudaStream::WaitFor(const std::shared_ptr<Event>& event) {
  if (event == nullptr) return absl::OkStatus();
  auto* cuda_event = dynamic_cast<CudaEvent*>(event.get());
  absl::Status status;
  if (cuda_event == nullptr) {
    status = event->Wait();  // a host event: nothing the device can wait on
  } else if (!cuda_event->host_status().ok()) {
    status = cuda_event->host_status();
  } else {
    status = CudaStatus(cudaStreamWaitEvent(handle_, cuda_event->handle(), 0), "cudaStreamWaitEvent");
  }
  std::lock_guard<std::mutex> lock(mu_);
  ReleaseFinished();
  if (!status.ok() && first_error_.ok()) first_error_ = status;
  return status;
}

std::shared_ptr<TimeMark> CudaStream::MarkTime() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!first_error_.ok()) return std::make_shared<CudaTimeMark>(first_error_, nullptr);
  cudaEvent_t event = nullptr;
  absl::Status status = CudaStatus(cudaEventCreate(&event), "cudaEventCreate");  // timing enabled
  if (status.ok()) status = CudaStatus(cudaEventRecord(event, handle_), "cudaEventRecord");
  if (!status.ok() && event != nullptr) {
    cudaEventDestroy(event);
    event = nullptr;
  }
  return std::make_shared<CudaTimeMark>(std::move(status), event);
}

absl::Status CudaStream::Synchronize() {
  absl::Status status = CudaStatus(cudaStreamSynchronize(handle_), "cudaStreamSynchronize");
  std::lock_guard<std::mutex> lock(mu_);
  if (!status.ok() && first_error_.ok()) first_error_ = status;
  in_flight_.clear();
  return first_error_;
}

absl::Status CudaStream::AwaitDeviceWork() {
  return CudaStatus(cudaStreamSynchronize(handle_), "cudaStreamSynchronize");
}

}  // namespace pdist::exec::cuda
