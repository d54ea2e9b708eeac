// The CPU backend's streams (executor/stream.h):
//
// - CpuInlineStream: the calling thread. Kernels run as they are submitted; waiting for an
//   event blocks the thread. A rank's compute stream.
// - CpuWorkerStream: a worker thread that runs the tasks in submission order while the calling
//   thread goes on computing — the CPU analogue of a CUDA stream for NCCL. A rank's
//   communication stream:
//
//     CpuWorkerStream stream;
//     std::shared_ptr<Event> done = stream.Submit([&] { return comm->AllReduce(g, g, kSum); });
//     ... backward ops that do not need g ...
//     PDIST_RETURN_IF_ERROR(done->Wait());
//
// Tasks run one at a time in submission order, so every rank issues its collectives in the same
// order whatever the timing of its compute. After a task fails the later ones are not run: they
// report the first failure.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/status/status.h"
#include "executor/stream.h"

namespace pdist::exec {

// An event completed by the host thread that ran the work.
class HostEvent final : public Event {
 public:
  absl::Status Wait() override;
  bool done() const override;
  void Complete(absl::Status status);

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  absl::Status status_;
};

// A mark of steady_clock, read by the thread that runs the stream's work when it gets there.
class HostTimeMark final : public TimeMark {
 public:
  using Clock = std::chrono::steady_clock;
  // A mark read now, on the calling thread.
  HostTimeMark();
  // A mark that `reached` completes once `*this` has been stamped (Stamp, on the stream's thread).
  explicit HostTimeMark(std::shared_ptr<HostEvent> reached) : reached_(std::move(reached)) {}
  void Stamp() { time_ = Clock::now(); }  // before `reached` completes: its mutex orders the read
  absl::StatusOr<double> SecondsSince(const TimeMark& earlier) const override;
  absl::Status Wait() const override { return Time().status(); }

 private:
  absl::StatusOr<Clock::time_point> Time() const;

  std::shared_ptr<HostEvent> reached_;  // null: stamped at construction
  Clock::time_point time_;
};

class CpuInlineStream final : public Stream {
 public:
  Device device() const override { return Device::Cpu(); }
  std::shared_ptr<Event> Submit(std::function<absl::Status()> work) override;
  std::shared_ptr<Event> Record() override;
  absl::Status WaitFor(const std::shared_ptr<Event>& event) override;
  std::shared_ptr<TimeMark> MarkTime() override { return std::make_shared<HostTimeMark>(); }
  absl::Status Synchronize() override { return first_error_; }

 private:
  absl::Status first_error_;
};

class CpuWorkerStream final : public Stream {
 public:
  CpuWorkerStream();
  // Runs what is queued, then joins the thread.
  ~CpuWorkerStream() override;
  CpuWorkerStream(const CpuWorkerStream&) = delete;
  CpuWorkerStream& operator=(const CpuWorkerStream&) = delete;

  Device device() const override { return Device::Cpu(); }
  std::shared_ptr<Event> Submit(std::function<absl::Status()> task) override;
  std::shared_ptr<Event> Record() override;
  // Queues a task that waits for `event`: what is submitted later runs after it.
  absl::Status WaitFor(const std::shared_ptr<Event>& event) override;
  // Queues a task that stamps the mark: the time the worker got there.
  std::shared_ptr<TimeMark> MarkTime() override;
  absl::Status Synchronize() override;

 private:
  void Enqueue(std::function<absl::Status()> task, std::shared_ptr<HostEvent> done);
  void Loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<std::function<absl::Status()>, std::shared_ptr<HostEvent>>> queue_;
  std::shared_ptr<HostEvent> last_;
  absl::Status first_error_;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace pdist::exec
