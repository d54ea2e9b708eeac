// Timeline: the recorder, scoped spans, and the bubble the spans leave.
#include "executor/timeline.h"

#include <algorithm>
#include <limits>

#include "ir/status.h"

namespace pdist::exec {

void TimelineRecorder::Reset(Clock::time_point origin) {
  std::lock_guard<std::mutex> lock(mu_);
  origin_ = origin;
  spans_.clear();
  marked_.clear();
  anchor_.reset();
}

double TimelineRecorder::Now() const {
  Clock::time_point now = Clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  return std::chrono::duration<double>(now - origin_).count();
}

void TimelineRecorder::Add(TimelineSpan span) {
  std::lock_guard<std::mutex> lock(mu_);
  spans_.push_back(std::move(span));
}

std::vector<TimelineSpan> TimelineRecorder::Spans() const {
  std::lock_guard<std::mutex> lock(mu_);
  return spans_;
}

absl::Status TimelineRecorder::AnchorClock(Stream& stream) {
  std::shared_ptr<TimeMark> anchor = stream.MarkTime();
  PDIST_RETURN_IF_ERROR(anchor->Wait());  // the device is at the mark: it is now
  const double now = Now();
  std::lock_guard<std::mutex> lock(mu_);
  anchor_ = std::move(anchor);
  anchor_s_ = now;
  marked_.clear();
  return absl::OkStatus();
}

void TimelineRecorder::AddMarked(TimelineSpan span, std::shared_ptr<TimeMark> start, std::shared_ptr<TimeMark> end) {
  std::lock_guard<std::mutex> lock(mu_);
  marked_.push_back({std::move(span), std::move(start), std::move(end)});
}

absl::Status TimelineRecorder::ResolveMarks() {
  std::vector<Marked> marked;
  std::shared_ptr<TimeMark> anchor;
  double anchor_s = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    marked.swap(marked_);
    anchor = anchor_;
    anchor_s = anchor_s_;
  }
  if (marked.empty()) return absl::OkStatus();
  if (anchor == nullptr) {
    return absl::FailedPreconditionError("timeline: spans marked on a stream before the clock was anchored");
  }
  std::vector<TimelineSpan> timed;
  for (Marked& m : marked) {
    // The length between the span's own marks: a CUDA event's milliseconds are a float, a
    // microsecond apart ten seconds after the anchor.
    PDIST_ASSIGN_OR_RETURN(double start, m.start->SecondsSince(*anchor));
    PDIST_ASSIGN_OR_RETURN(double length, m.end->SecondsSince(*m.start));
    m.span.start_s = anchor_s + start;
    m.span.end_s = m.span.start_s + length;
    timed.push_back(std::move(m.span));
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (TimelineSpan& span : timed) spans_.push_back(std::move(span));
  return absl::OkStatus();
}

ScopedSpan::ScopedSpan(TimelineRecorder* recorder, TimelineSpan span, Stream& stream)
    : recorder_(recorder), span_(std::move(span)), stream_(stream) {
  if (recorder_ != nullptr) start_ = stream_.MarkTime();
}

ScopedSpan::~ScopedSpan() {
  if (recorder_ != nullptr) recorder_->AddMarked(std::move(span_), std::move(start_), stream_.MarkTime());
}

std::pair<double, double> SpanTimeRange(const TimelineRows& rows) {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -lo;
  for (const auto& [rank, spans] : rows) {
    for (const TimelineSpan& s : spans) {
      lo = std::min(lo, s.start_s);
      hi = std::max(hi, s.end_s);
    }
  }
  if (lo > hi) return {0, 0};
  return {lo, hi};
}

std::vector<double> BubbleFractions(const TimelineRows& rows) {
  auto [t0, t1] = SpanTimeRange(rows);
  std::vector<double> bubbles(rows.size(), 0.0);
  if (!(t1 > t0)) return bubbles;
  for (size_t i = 0; i < rows.size(); ++i) {
    std::vector<std::pair<double, double>> busy;
    double waited = 0;  // "wait" spans lie inside jobs and never overlap one another
    for (const TimelineSpan& s : rows[i].second) {
      if (s.track != Track::kCompute || !(s.end_s > s.start_s)) continue;
      if (s.category == kWaitCategory) {
        waited += s.end_s - s.start_s;
      } else {
        busy.emplace_back(s.start_s, s.end_s);
      }
    }
    std::sort(busy.begin(), busy.end());
    // Union of the intervals: sweep in start order, counting only what extends past `reached`.
    double covered = 0, reached = -std::numeric_limits<double>::infinity();
    for (const auto& [start, end] : busy) {
      if (end <= reached) continue;
      covered += end - std::max(start, reached);
      reached = end;
    }
    bubbles[i] = std::clamp(1 - (covered - waited) / (t1 - t0), 0.0, 1.0);
  }
  return bubbles;
}

}  // namespace pdist::exec
