// CommStream: a worker thread that runs one rank's communication in program order while the
// calling thread goes on computing — the CPU analogue of a CUDA stream for NCCL with events.
//
//   CommStream stream;
//   std::shared_ptr<StreamEvent> done = stream.Submit([&] { return comm->AllReduce(g, g, kSum); });
//   ... backward ops that do not need g ...
//   PDIST_RETURN_IF_ERROR(done->Wait());
//
// Tasks run one at a time in submission order, so every rank issues its collectives in the
// same order whatever the timing of its compute. After a task fails the later ones are not run:
// they report the first failure.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/status/status.h"

namespace pdist::exec {

class StreamEvent {
 public:
  // Blocks until the task has run; its status.
  absl::Status Wait();
  bool done() const;

 private:
  friend class CommStream;
  void Complete(absl::Status status);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  absl::Status status_;
};

class CommStream {
 public:
  CommStream();
  // Runs what is queued, then joins the thread.
  ~CommStream();
  CommStream(const CommStream&) = delete;
  CommStream& operator=(const CommStream&) = delete;

  std::shared_ptr<StreamEvent> Submit(std::function<absl::Status()> task);
  // Waits for every task submitted so far; the first failure, if any.
  absl::Status Synchronize();

 private:
  void Loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<std::function<absl::Status()>, std::shared_ptr<StreamEvent>>> queue_;
  std::shared_ptr<StreamEvent> last_;
  absl::Status first_error_;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace pdist::exec
