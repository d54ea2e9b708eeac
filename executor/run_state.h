// The state of one executor run, shared by the whole-program run and the pipelined one
// (executor.cc, pipeline_run.cc): live-byte accounting and the tensors of a value table.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "executor/stream.h"
#include "executor/tensor.h"
#include "ir/pipeline_job.h"

namespace pdist::exec {

class TimelineRecorder;  // executor/timeline.h

// Live bytes of intermediate tensors, counted once per distinct buffer (views share one), in
// all and by kind: gradients (values of role gradient: what the backward makes) and the rest
// (activations), each with its own peak — what a memory model prices separately.
class LiveBytes {
 public:
  // `gradient`: the tensor is a gradient value's (the first acquirer of a buffer decides).
  void Acquire(const Tensor& t, bool gradient = false);
  void Release(const Tensor& t);
  // A result the communication stream will make, counted from when it is submitted (its size
  // is the IR's) until the compute thread takes the real tensor (Release it, then Acquire that)
  // or the stream drops it. `key` names the reservation (the value's table slot).
  void Reserve(const void* key, int64_t bytes, bool gradient);
  void Unreserve(const void* key);
  int64_t peak() const { return peak_; }
  int64_t live() const { return live_; }
  int64_t gradient_peak() const { return gradient_peak_; }
  int64_t activation_peak() const { return activation_peak_; }

 private:
  struct Buffer {
    int64_t bytes = 0;
    int refs = 0;
    bool gradient = false;
  };
  void Add(int64_t bytes, bool gradient);
  void Subtract(int64_t bytes, bool gradient);

  std::unordered_map<const void*, Buffer> buffers_;
  std::unordered_map<const void*, Buffer> reserved_;
  int64_t live_ = 0, peak_ = 0;
  int64_t gradient_live_ = 0, gradient_peak_ = 0, activation_peak_ = 0;
};

// A value a communication stream's op still owes: its event, its stream, and the slot the op
// leaves it in (readers on other streams wait for the event; every reader holds the slot).
struct Owed {
  std::shared_ptr<Event> event;  // null: nothing owed
  const Stream* stream = nullptr;
  std::shared_ptr<Tensor> slot;
};

// The tensors of one run of a program (or of one micro-batch of a pipelined step), by value id.
// Only the rank's compute thread touches a table. A communication stream's op leaves each result
// in a slot of its own (`owed`); the compute thread copies it into `values` once the op's event
// has fired (Executor::Await), and a later stream op that reads it holds the slot itself, so
// that the value lives until its last reader on any stream has run.
struct ValueTable {
  explicit ValueTable(size_t num_values) : values(num_values), owed(num_values), skip_release(num_values, false) {}
  std::vector<Tensor> values;
  std::vector<Owed> owed;  // what the communication streams still owe, by value id
  // Values whose last reader is a stream op, which holds their slot: dropped without waiting.
  std::vector<bool> skip_release;
};

// What every table of one run shares: the streams, the accounting, the profile.
struct RunState {
  // The rank's compute stream (the backend's; on the CPU, the calling thread).
  std::unique_ptr<Stream> compute;
  LiveBytes live;
  // A communication stream, made on its first op, and its kernels' times, taken by its own thread
  // (waiting for peers included) and merged into op_seconds once it is drained. The times come
  // first, so that they outlive the stream's thread.
  struct CommStream {
    std::map<std::string, double> op_seconds;
    std::unique_ptr<Stream> stream;
  };
  // [0]: the collectives'; then one per point-to-point channel, in the executor's order
  // (Executor::comm_stream_of_). Sized once, when the run opens its streams: work items keep
  // pointers into it.
  std::vector<CommStream> comm;
  std::map<std::string, double> op_seconds;
  TimelineRecorder* timeline = nullptr;  // spans of jobs and of communication, when given
  // Where updated states take their new values as soon as the old ones are dead
  // (MemoryPlan::install_after); the rest are installed when the step finishes.
  std::map<std::string, Tensor>* workspace = nullptr;
  ir::PipelineJob job;                   // the job running (a whole-program run: none)
  bool in_job = false;

  // Whether any communication stream was made (some op went to one).
  bool communicated() const {
    for (const CommStream& c : comm) {
      if (c.stream != nullptr) return true;
    }
    return false;
  }
  // Waits for every communication stream; the first failure.
  absl::Status SynchronizeComm() {
    absl::Status first;
    for (CommStream& c : comm) {
      if (c.stream != nullptr) first.Update(c.stream->Synchronize());
    }
    return first;
  }
};

}  // namespace pdist::exec
