// Stream and Event: the ordering every backend gives the executor.
//
// A Stream runs the work submitted to it in submission order; an Event says that one piece of
// work has run. The executor has a compute stream and a communication stream per rank, and
// orders them by events, never by waiting on the host where the device can wait instead:
//
//   std::shared_ptr<Event> reduced = comm->Submit([&] { return AllReduce(grad); });
//   ... more backward kernels on `compute` ...
//   PDIST_RETURN_IF_ERROR(compute->WaitFor(reduced));   // the optimizer's kernels come after
//
// Backends: executor/cpu_stream.h (the calling thread, and a worker thread for communication:
// the CPU analogue of a CUDA stream) and executor/cuda/cuda_stream.h (cudaStream_t / cudaEvent_t).
#pragma once

#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "executor/device.h"

namespace pdist::exec {

class Event {
 public:
  virtual ~Event() = default;
  // Blocks the calling thread until the work has run; that work's status.
  virtual absl::Status Wait() = 0;
  // Whether the work has run (never blocks).
  virtual bool done() const = 0;
};

// A point in a stream's work, timed by the clock of the device that runs it, when the stream
// reaches it: a CUDA event recorded with timing, or steady_clock read by the host thread that runs
// the stream's work. A timeline built from marks says when work ran, not when the host
// submitted it — on a GPU the host runs ahead of the device by up to a whole step.
class TimeMark {
 public:
  virtual ~TimeMark() = default;
  // Seconds from `earlier` to this mark (negative if this one came first). Both must be marks
  // of one device's clock; waits until the device has reached both. A stream that failed before
  // reaching a mark leaves it without a time: that failure.
  virtual absl::StatusOr<double> SecondsSince(const TimeMark& earlier) const = 0;
  // Blocks until the device has reached the mark; the stream's failure if it never will.
  virtual absl::Status Wait() const = 0;
};

enum class StreamPurpose : int8_t { kCompute, kCommunication };

class Stream {
 public:
  virtual ~Stream() = default;
  virtual Device device() const = 0;
  // Enqueues `work` after everything submitted before it. The event fires once it has run (on
  // a GPU: once the device work it enqueued has). After a failure, later work is not run and
  // reports the first failure.
  virtual std::shared_ptr<Event> Submit(std::function<absl::Status()> work) = 0;
  // An event that fires once everything submitted so far has run (on the calling-thread
  // stream: at once). Another stream that reads this one's results waits for it.
  virtual std::shared_ptr<Event> Record() = 0;
  // Work submitted to this stream from now on runs after `event`. A stream that is the calling
  // thread waits here and returns the event's status; a device stream records the dependency
  // and returns at once (a failure then shows at the next Synchronize).
  virtual absl::Status WaitFor(const std::shared_ptr<Event>& event) = 0;
  // A mark that the stream reaches once everything submitted so far has run; the work
  // submitted next runs after it.
  virtual std::shared_ptr<TimeMark> MarkTime() = 0;
  // Waits for everything submitted so far; the first failure, if any.
  virtual absl::Status Synchronize() = 0;
  // Blocks until the device has run the work enqueued on this stream so far. Unlike
  // Synchronize it keeps out of the stream's bookkeeping, so a submitted work item may call it:
  // the per-op profile does, to time a kernel rather than its launch. Host streams run work
  // when it is submitted: nothing is left to wait for.
  virtual absl::Status AwaitDeviceWork() { return absl::OkStatus(); }
};

}  // namespace pdist::exec
