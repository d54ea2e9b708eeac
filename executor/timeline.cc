// Timeline: the recorder, scoped spans, and the bubble the spans leave.
#include "executor/timeline.h"

#include <algorithm>
#include <limits>

namespace pdist::exec {

void TimelineRecorder::Reset(Clock::time_point origin) {
  std::lock_guard<std::mutex> lock(mu_);
  origin_ = origin;
  spans_.clear();
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

ScopedSpan::ScopedSpan(TimelineRecorder* recorder, TimelineSpan span)
    : recorder_(recorder), span_(std::move(span)) {
  if (recorder_ != nullptr) span_.start_s = recorder_->Now();
}

ScopedSpan::~ScopedSpan() {
  if (recorder_ == nullptr) return;
  span_.end_s = recorder_->Now();
  recorder_->Add(std::move(span_));
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
