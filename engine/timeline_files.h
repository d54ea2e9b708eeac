// The timeline of a step as files (exec::TimelineRecorder's spans, executor/timeline.h): a
// Chrome trace per rank for chrome://tracing or Perfetto, and one SVG picture of the whole
// pipeline that reads like the schedule figures of pipeline papers.
//
//   PDIST_RETURN_IF_ERROR(WriteTimelines("/tmp/trace", {{0, recorder.Spans()}, ...}, {}));
//   // /tmp/trace/rank0.trace.json …, /tmp/trace/pipeline.svg
//
// The engine writes them (EngineOptions::timeline_dir); pdist-run, whose ranks are processes
// that each write their own trace, reads them back and draws the picture.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "executor/timeline.h"

namespace pdist::engine {

using exec::TimelineRows;
using exec::TimelineSpan;

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
// labelled "rank N"; a box per compute span, coloured by category — prologue #c27ba0 (mauve),
// forward #6fa8dc (blue),
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
// Makes `dir` (and its parents) unless it is a directory already; a file there is an
// InvalidArgument naming it. Tools and the engine call it before the first step, not after it.
absl::Status MakeTimelineDirectory(const std::string& dir);
// Only <dir>/rank<k>.trace.json: a rank that runs as its own process writes its part.
absl::Status WriteChromeTrace(const std::string& dir, int64_t rank, const std::vector<TimelineSpan>& spans);

// The rows of every <dir>/rank<k>.trace.json (as ChromeTraceJson writes them), by rank, and
// <dir>/pipeline.svg drawn from them: what pdist-run does after ranks that ran as processes
// each wrote their trace. Errors name the file that does not parse.
absl::StatusOr<TimelineRows> ReadChromeTraces(const std::string& dir);
absl::Status DrawPipelineFromTraces(const std::string& dir, const PipelineSvgOptions& options);

}  // namespace pdist::engine
