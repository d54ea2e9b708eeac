// CommStream: a FIFO of tasks on one worker thread, with an event per task.
#include "executor/comm_stream.h"

#include "executor/executor.h"

namespace pdist::exec {

absl::Status StreamEvent::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return done_; });
  return status_;
}

bool StreamEvent::done() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

void StreamEvent::Complete(absl::Status status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    status_ = std::move(status);
  }
  cv_.notify_all();
}

CommStream::CommStream() : worker_([this] { Loop(); }) {}

CommStream::~CommStream() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

std::shared_ptr<StreamEvent> CommStream::Submit(std::function<absl::Status()> task) {
  auto event = std::make_shared<StreamEvent>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.emplace_back(std::move(task), event);
    last_ = event;
  }
  cv_.notify_all();
  return event;
}

absl::Status CommStream::Synchronize() {
  std::shared_ptr<StreamEvent> last;
  {
    std::lock_guard<std::mutex> lock(mu_);
    last = last_;
  }
  if (last != nullptr) last->Wait().IgnoreError();
  std::lock_guard<std::mutex> lock(mu_);
  return first_error_;
}

void CommStream::Loop() {
  // Communication kernels only copy and add; an OpenMP team of this thread's own would spin on
  // the cores the compute thread needs.
  SetKernelThreadsOfThisThread(1);
  for (;;) {
    std::function<absl::Status()> task;
    std::shared_ptr<StreamEvent> event;
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
