// Timeline: spans of pipeline jobs and communication recorded during a step, written out as a
// Chrome trace per rank and as one SVG picture of the whole pipeline.
//
//   TimelineRecorder recorder;               // one per rank; origin = now
//   {
//     ScopedSpan span(&recorder, {.name = "F0", .category = "forward", .micro_batch = 0});
//     ... run the job ...
//   }                                         // records [construction, destruction]
//   PDIST_RETURN_IF_ERROR(WriteTimelines("/tmp/trace", {{0, recorder.Spans()}, ...}, {}));
//
// The SVG reads like the schedule figures of pipeline papers (GPipe, 1F1B, zero-bubble): one
// row per rank, time to the right, a box per job coloured by its kind with the micro-batch id
// in it, so a wrong schedule or an unexpected bubble shows at a glance:
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
  // Seconds since the rank's step began, or since any origin shared by the rows drawn together.
  double start_s = 0;
  double end_s = 0;
};

// Collects the spans of one rank. Thread-safe: the compute thread and the comm stream both add.
// Times come from steady_clock, in seconds since the origin. Ranks that are threads of one
// process can share an origin (construct them all with the same time point) so that their rows
// line up in the SVG; ranks in separate processes are aligned only as well as their step starts.
class TimelineRecorder {
 public:
  using Clock = std::chrono::steady_clock;

  TimelineRecorder() : origin_(Clock::now()) {}
  explicit TimelineRecorder(Clock::time_point origin) : origin_(origin) {}

  // Drops the spans recorded so far; the origin becomes now (or `origin`).
  void Reset() { Reset(Clock::now()); }
  void Reset(Clock::time_point origin);
  // Seconds since the origin.
  double Now() const;
  void Add(TimelineSpan span);
  // A copy of the spans, in the order they were added.
  std::vector<TimelineSpan> Spans() const;

 private:
  mutable std::mutex mu_;
  Clock::time_point origin_;
  std::vector<TimelineSpan> spans_;
};

// Records `span` over the lifetime of the object: start at construction, end at destruction.
// With a null recorder it does nothing, so call sites need no `if (tracing)`.
//
//   ScopedSpan s(recorder, {.name = "c_allreduce", .category = "comm", .track = Track::kComm});
class ScopedSpan {
 public:
  ScopedSpan(TimelineRecorder* recorder, TimelineSpan span);
  ~ScopedSpan();
  ScopedSpan(const ScopedSpan&) = delete;
  ScopedSpan& operator=(const ScopedSpan&) = delete;

 private:
  TimelineRecorder* recorder_;
  TimelineSpan span_;
};

// A rank id and the spans it recorded; lists of rows are drawn top to bottom in the given order.
using TimelineRows = std::vector<std::pair<int64_t, std::vector<TimelineSpan>>>;

// The spans of one rank in Chrome's Trace Event Format, for chrome://tracing or Perfetto:
//
//   {"traceEvents": [
//     {"name": "F3", "cat": "forward", "ph": "X", "ts": 500000, "dur": 1000000,
//      "pid": 0, "tid": 0, "args": {"micro_batch": 3, "chunk": 0}},
//     {"name": "process_name", "ph": "M", "pid": 0, "args": {"name": "rank 0"}}, ...],
//    "displayTimeUnit": "ms"}
//
// ts and dur in microseconds; pid is the rank; tid 0 is compute, 1 comm (named by metadata
// events); args carry micro_batch and chunk when they are >= 0. A span ending before it starts
// gets dur 0.
std::string ChromeTraceJson(int64_t rank, const std::vector<TimelineSpan>& spans);

struct PipelineSvgOptions {
  double width_px = 1200;     // of the whole picture, labels included
  double row_height_px = 28;  // of one rank's job boxes
  std::string title;          // drawn above the rows when not empty
};

// The pipeline as a standalone SVG 1.1 document: one row per rank (in the order of `rows`),
// labelled "rank N"; a box per compute span, coloured by category — forward #6fa8dc (blue),
// backward #93c47d (light green), backward_input #38a169 (green), backward_weight #f6b26b
// (orange), optimizer #999999 (grey), anything else #d9d9d9 (light grey); comm spans as a thin
// #8e7cc3 (purple) strip under the row. Each span is a <g> holding a <title> tooltip
// ("F3 (forward) 1.250 ms"), a <rect class="job"> (class "comm" for the strips) and, when the
// box is wide enough, its label: the micro-batch id ("3", or "3.1" for chunk 1), or the name for
// spans of no micro-batch ("O"). The time axis runs from the earliest start to the latest end
// over all ranks, in ms from that start; a legend lists the categories drawn ("other" for
// unknown ones). Names and the title are XML-escaped.
//
//   <g><title>F3 (forward) 1.250 ms</title><rect class="job" ... fill="#6fa8dc" .../>
//      <text ...>3</text></g>
std::string PipelineSvg(const TimelineRows& rows, const PipelineSvgOptions& options);

// Writes <dir>/rank<k>.trace.json for each row (k = its rank id) and <dir>/pipeline.svg,
// creating `dir` if needed. Errors name the path; two rows with the same rank id are an
// InvalidArgument (their traces would overwrite each other).
absl::Status WriteTimelines(const std::string& dir, const TimelineRows& rows,
                            const PipelineSvgOptions& options);
// Only <dir>/rank<k>.trace.json: a rank that runs as its own process writes its part.
absl::Status WriteChromeTrace(const std::string& dir, int64_t rank, const std::vector<TimelineSpan>& spans);

// The rows of every <dir>/rank<k>.trace.json (as ChromeTraceJson writes them), by rank, and
// <dir>/pipeline.svg drawn from them: what pdist-run does after ranks that ran as processes
// each wrote their trace. Errors name the file that does not parse.
absl::StatusOr<TimelineRows> ReadChromeTraces(const std::string& dir);
absl::Status DrawPipelineFromTraces(const std::string& dir, const PipelineSvgOptions& options);

// The bubble of each row: 1 - (time covered by its compute spans, overlaps counted once, less
// the "wait" spans inside them: a job waiting for its activation) / (latest end - earliest start
// over all spans of all rows, comm included) — the fraction of the step during which the rank's
// compute thread sat idle. For 1F1B with p stages and m
// micro-batches of uniform cost (no optimizer, no comm spans) it is the textbook (p-1)/(m+p-1)
// on every rank. All zeros when the rows hold no time at all.
std::vector<double> BubbleFractions(const TimelineRows& rows);

}  // namespace pdist::exec
