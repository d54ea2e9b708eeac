// The CPU streams: the calling thread, and a FIFO of tasks on one worker thread with an event per task.
#include "executor/cpu_stream.h"

#include "executor/executor.h"
#include "ir/status.h"

namespace pdist::exec {

absl::Status HostEvent::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return done_; });
  return status_;
}

bool HostEvent::done() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

void HostEvent::Complete(absl::Status status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    status_ = std::move(status);
  }
  cv_.notify_all();
}

HostTimeMark::HostTimeMark() : time_(Clock::now()) {}

absl::StatusOr<HostTimeMark::Clock::time_point> HostTimeMark::Time() const {
  if (reached_ != nullptr) PDIST_RETURN_IF_ERROR(reached_->Wait());
  return time_;
}

absl::StatusOr<double> HostTimeMark::SecondsSince(const TimeMark& earlier) const {
  const auto* host = dynamic_cast<const HostTimeMark*>(&earlier);
  if (host == nullptr) return absl::InvalidArgumentError("time marks of two clocks (the host's and a device's)");
  PDIST_ASSIGN_OR_RETURN(Clock::time_point from, host->Time());
  PDIST_ASSIGN_OR_RETURN(Clock::time_point to, Time());
  return std::chrono::duration<double>(to - from).count();
}

std::shared_ptr<Event> CpuInlineStream::Submit(std::function<absl::Status()> work) {
  auto event = std::make_shared<HostEvent>();
  absl::Status status = first_error_.ok() ? work() : first_error_;
  if (first_error_.ok()) first_error_ = status;
  event->Complete(std::move(status));
  return event;
}

std::shared_ptr<Event> CpuInlineStream::Record() {
  auto event = std::make_shared<HostEvent>();
  event->Complete(first_error_);
  return event;
}

absl::Status CpuInlineStream::WaitFor(const std::shared_ptr<Event>& event) {
  return event == nullptr ? absl::OkStatus() : event->Wait();
}

CpuWorkerStream::CpuWorkerStream() : worker_([this] { Loop(); }) {}

CpuWorkerStream::~CpuWorkerStream() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

void CpuWorkerStream::Enqueue(std::function<absl::Status()> task, std::shared_ptr<HostEvent> done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    last_ = done;
    queue_.emplace_back(std::move(task), std::move(done));
  }
  cv_.notify_all();
}

std::shared_ptr<Event> CpuWorkerStream::Submit(std::function<absl::Status()> task) {
  auto event = std::make_shared<HostEvent>();
  Enqueue(std::move(task), event);
  return event;
}

std::shared_ptr<Event> CpuWorkerStream::Record() {
  return Submit([] { return absl::OkStatus(); });
}

std::shared_ptr<TimeMark> CpuWorkerStream::MarkTime() {
  // The task's event is the mark's "reached": a task not run (after a failure) reports why.
  auto reached = std::make_shared<HostEvent>();
  auto mark = std::make_shared<HostTimeMark>(reached);
  Enqueue(
      [mark] {
        mark->Stamp();
        return absl::OkStatus();
      },
      std::move(reached));
  return mark;
}

absl::Status CpuWorkerStream::WaitFor(const std::shared_ptr<Event>& event) {
  if (event == nullptr || event->done()) return absl::OkStatus();
  Submit([event] { return event->Wait(); });
  return absl::OkStatus();
}

absl::Status CpuWorkerStream::Synchronize() {
  std::shared_ptr<HostEvent> last;
  {
    std::lock_guard<std::mutex> lock(mu_);
    last = last_;
  }
  if (last != nullptr) last->Wait().IgnoreError();
  std::lock_guard<std::mutex> lock(mu_);
  return first_error_;
}

void CpuWorkerStream::Loop() {
  // Communication kernels only copy and add; an OpenMP team of this thread's own would spin on
  // the cores the compute thread needs.
  SetKernelThreadsOfThisThread(1);
  for (;;) {
    std::function<absl::Status()> task;
    std::shared_ptr<HostEvent> event;
    absl::Status failed;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      task = std::move(queue_.front().first);
      event = std::move(queue_.front().second);
      queue_.pop_front();
      failed = first_error_;
    }
    absl::Status status = failed.ok() ? task() : failed;
    if (!status.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      if (first_error_.ok()) first_error_ = status;
    }
    event->Complete(std::move(status));
  }
}

}  // namespace pdist::exec
