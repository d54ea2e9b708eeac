// Timeline: spans of pipeline jobs and communication recorded during a step, and the bubble
// they leave. Writing them out (a Chrome trace per rank, one SVG picture of the whole pipeline)
// is the engine's: engine/timeline_files.h.
//
//   TimelineRecorder recorder;               // one per rank; origin = now
//   recorder.AnchorClock(compute);           // the run's device clock against the host's
//   {
//     ScopedSpan span(&recorder, {.name = "F0", .category = "forward", .micro_batch = 0}, compute);
//     ... submit the job's work to `compute` ...
//   }                                         // marks the stream before and after the work
//   recorder.ResolveMarks();                  // once the streams are drained: when it ran
//   BubbleFractions({{0, recorder.Spans()}, ...})     // per rank: the idle fraction of the step
//
// engine::WriteTimelines draws them as an SVG that reads like the schedule figures of pipeline
// papers (GPipe, 1F1B, zero-bubble): one row per rank, time to the right, a box per job
// coloured by its kind with the micro-batch id in it, so a wrong schedule or an unexpected
// bubble shows at a glance:
//
//   rank 0 |F0|F1|F2|F3|      |B0|  |B1|  |B2|  |B3|O|
//   rank 1    |F0|F1|F2|F3|B0|  |B1|  |B2|  |B3|    |O|
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "executor/stream.h"

namespace pdist::exec {

// Where a span ran: the compute thread (pipeline jobs) or the communication stream.
enum class Track : int8_t { kCompute, kComm };

struct TimelineSpan {
  std::string name;  // "F3", "B0.1", "c_allreduce", "c_send"
  // For jobs an ir::JobKindName ("forward", "backward", "backward_input", "backward_weight",
  // "optimizer"); the SVG colours boxes by it. For communication "comm" or the op type.
  std::string category;
  Track track = Track::kCompute;
  int64_t micro_batch = -1;  // -1: not tied to one micro-batch
  int64_t chunk = -1;        // model chunk; -1: none
  // Communication: the stream it ran on ("comm": the collectives'; "p2p 0>1": a point-to-point
  // channel's), a row of its own in a Chrome trace. Empty reads as "comm".
  std::string lane;
  // Communication: when it was put on its stream, seconds as start_s (-1: not recorded). The
  // wait until start_s is the stream's queue: earlier work, or a thread that was not scheduled.
  double queued_s = -1;
  // Seconds since the rank's step began, or since any origin shared by the rows drawn together.
  double start_s = 0;
  double end_s = 0;
};

// Collects the spans of one rank. Thread-safe: the rank's thread adds spans, the engine resets
// the recorder. Times are seconds since the origin: steady_clock's, or a device's anchored to it. Ranks that are threads of one
// process can share an origin (construct them all with the same time point) so that their rows
// line up in the SVG; ranks in separate processes are aligned only as well as their step starts.
class TimelineRecorder {
 public:
  using Clock = std::chrono::steady_clock;

  TimelineRecorder() : origin_(Clock::now()) {}
  explicit TimelineRecorder(Clock::time_point origin) : origin_(origin) {}

  // Drops the spans recorded so far and the clock's anchor; the origin becomes now (or `origin`).
  void Reset() { Reset(Clock::now()); }
  void Reset(Clock::time_point origin);
  // Seconds since the origin.
  double Now() const;
  void Add(TimelineSpan span);
  // A copy of the spans, in the order they were added.
  std::vector<TimelineSpan> Spans() const;

  // Spans timed on the device (executor/stream.h's TimeMark): a GPU runs a kernel well after the
  // host submitted it, so a span read off the host clock is its submission, not its run. A run
  // anchors the device's clock to this one on its compute stream (a mark the device is waited
  // for, read as Now()), adds spans between marks of its streams, and times them once its
  // streams are drained. The host's streams give marks too (steady_clock when their thread gets
  // there), so the CPU backend takes the same path.
  //
  //   recorder.AnchorClock(compute);                 // at the run's start
  //   recorder.AddMarked(span, comm.MarkTime(), ...);  // around work submitted to a stream
  //   recorder.ResolveMarks();                       // after the run's streams are drained
  //
  // Anchoring again drops the marked spans not yet timed (a run that failed).
  absl::Status AnchorClock(Stream& stream);
  void AddMarked(TimelineSpan span, std::shared_ptr<TimeMark> start, std::shared_ptr<TimeMark> end);
  // Times the marked spans (start_s and end_s on this recorder's clock) and adds them; waits
  // until the device has reached their marks. A mark that cannot be read is that error, and the
  // marked spans are dropped (the executor says so on stderr and the step goes on: a timeline
  // is never a reason to fail a step).
  absl::Status ResolveMarks();

 private:
  struct Marked {
    TimelineSpan span;
    std::shared_ptr<TimeMark> start, end;
  };

  mutable std::mutex mu_;
  Clock::time_point origin_;
  std::vector<TimelineSpan> spans_;
  std::shared_ptr<TimeMark> anchor_;  // a mark on the anchoring stream, reached at anchor_s_
  double anchor_s_ = 0;
  std::vector<Marked> marked_;  // added since the anchor, not yet timed
};

// Records `span` around the work submitted to `stream` during the object's lifetime: a mark on
// the stream at construction and one at destruction, timed when the device got there (the host's
// own clock would say when the work was submitted). With a null recorder it does nothing, so
// call sites need no `if (tracing)`.
//
//   ScopedSpan s(recorder, {.name = "F0", .category = "forward"}, *compute_stream);
class ScopedSpan {
 public:
  ScopedSpan(TimelineRecorder* recorder, TimelineSpan span, Stream& stream);
  ~ScopedSpan();
  ScopedSpan(const ScopedSpan&) = delete;
  ScopedSpan& operator=(const ScopedSpan&) = delete;

 private:
  TimelineRecorder* recorder_;
  TimelineSpan span_;
  Stream& stream_;
  std::shared_ptr<TimeMark> start_;
};

// A rank id and the spans it recorded; lists of rows are drawn top to bottom in the given order.
using TimelineRows = std::vector<std::pair<int64_t, std::vector<TimelineSpan>>>;

// The "wait" spans a job records while it waits for its input (an activation from another
// stage): inside the job's own span, and not compute.
inline constexpr const char kWaitCategory[] = "wait";

// Earliest start and latest end over all spans of all rows; {0, 0} without spans.
std::pair<double, double> SpanTimeRange(const TimelineRows& rows);

// The bubble of each row: 1 - (time covered by its compute spans, overlaps counted once, less
// the "wait" spans inside them: a job waiting for its activation) / (latest end - earliest start
// over all spans of all rows, comm included) — the fraction of the step during which the rank's
// compute thread sat idle. For 1F1B with p stages and m
// micro-batches of uniform cost (no optimizer, no comm spans) it is the textbook (p-1)/(m+p-1)
// on every rank. All zeros when the rows hold no time at all.
std::vector<double> BubbleFractions(const TimelineRows& rows);

}  // namespace pdist::exec
