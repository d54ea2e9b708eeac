// Timeline: bubble fractions, and a recorder fed from two threads.
#include "executor/timeline.h"

#include <chrono>
#include <latch>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "executor/cpu_stream.h"
#include "tests/testing/timeline_spans.h"

namespace pdist::exec {
namespace {

using testing::Comm;
using testing::Job;

TEST(BubbleFractionsTest, UnionOfComputeOverTheWholeStep) {
  TimelineRows rows = {
      // [0,2] and [1,3] overlap: busy 3 + 1 = 4 of the step's 10 s.
      {0, {Job("F0", "forward", 0, 0, 2), Job("F1", "forward", 1, 1, 3),
           Job("B0", "backward", 0, 5, 6)}},
      // Comm does not count as busy, but it does stretch the step to 10 s.
      {1, {Job("F0", "forward", 0, 2, 4), Comm("c_allreduce", 4, 10)}},
  };
  std::vector<double> bubbles = BubbleFractions(rows);
  ASSERT_EQ(bubbles.size(), 2u);
  EXPECT_NEAR(bubbles[0], 0.6, 1e-12);
  EXPECT_NEAR(bubbles[1], 0.8, 1e-12);
  EXPECT_EQ(BubbleFractions({{0, {}}, {1, {}}}), (std::vector<double>{0, 0}));
}

TEST(BubbleFractionsTest, OneFOneBMatchesTheTextbookBubble) {
  // 2 stages, 4 micro-batches, F = 1 s, B = 2 s, laid out by hand:
  //   stage 0: F0 F1 . . B0 B0 F2 B1 B1 F3 B2 B2 . B3 B3
  //   stage 1: . F0 B0 B0 F1 B1 B1 F2 B2 B2 F3 B3 B3 . .
  TimelineRows rows = {
      {0, {Job("F0", "forward", 0, 0, 1), Job("F1", "forward", 1, 1, 2),
           Job("B0", "backward", 0, 4, 6), Job("F2", "forward", 2, 6, 7),
           Job("B1", "backward", 1, 7, 9), Job("F3", "forward", 3, 9, 10),
           Job("B2", "backward", 2, 10, 12), Job("B3", "backward", 3, 13, 15)}},
      {1, {Job("F0", "forward", 0, 1, 2), Job("B0", "backward", 0, 2, 4),
           Job("F1", "forward", 1, 4, 5), Job("B1", "backward", 1, 5, 7),
           Job("F2", "forward", 2, 7, 8), Job("B2", "backward", 2, 8, 10),
           Job("F3", "forward", 3, 10, 11), Job("B3", "backward", 3, 11, 13)}},
  };
  const double p = 2, m = 4;
  for (double bubble : BubbleFractions(rows)) EXPECT_NEAR(bubble, (p - 1) / (m + p - 1), 1e-12);
}

TEST(TimelineRecorderTest, CollectsSpansFromTwoThreads) {
  TimelineRecorder recorder;
  CpuInlineStream compute_stream, comm_stream;
  ASSERT_TRUE(recorder.AnchorClock(compute_stream).ok());
  constexpr int kPerThread = 500;
  auto work = [&](Track track, Stream* stream) {
    for (int i = 0; i < kPerThread; ++i) {
      ScopedSpan span(&recorder, {.name = absl::StrCat("s", i), .category = "forward",
                                  .track = track, .micro_batch = i}, *stream);
    }
  };
  std::thread compute(work, Track::kCompute, &compute_stream), comm(work, Track::kComm, &comm_stream);
  compute.join();
  comm.join();
  ASSERT_TRUE(recorder.ResolveMarks().ok());
  std::vector<TimelineSpan> spans = recorder.Spans();
  ASSERT_EQ(spans.size(), 2u * kPerThread);
  int on_comm = 0;
  for (const TimelineSpan& s : spans) {
    EXPECT_GE(s.start_s, 0);
    EXPECT_LE(s.start_s, s.end_s);
    on_comm += s.track == Track::kComm;
  }
  EXPECT_EQ(on_comm, kPerThread);

  recorder.Reset();
  EXPECT_TRUE(recorder.Spans().empty());
  // Without a recorder a ScopedSpan records nothing (and does not crash).
  { ScopedSpan ignored(nullptr, {.name = "nothing", .category = "forward"}, compute_stream); }
  EXPECT_TRUE(recorder.Spans().empty());
}

TEST(TimelineRecorderTest, MarkedSpansAreTimedWhenTheirStreamRanThem) {
  TimelineRecorder recorder;
  CpuInlineStream compute;
  CpuWorkerStream comm;
  ASSERT_TRUE(recorder.AnchorClock(compute).ok());
  const double asked = recorder.Now();
  std::latch go(1);
  {
    // The host leaves this scope at once; the stream runs the work once the host has gone on.
    ScopedSpan span(&recorder, {.name = "c_allreduce", .category = "comm", .track = Track::kComm}, comm);
    comm.Submit([&go] {
      go.wait();
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      return absl::OkStatus();
    });
  }
  const double left = recorder.Now();
  go.count_down();
  EXPECT_TRUE(recorder.Spans().empty());  // not timed before the marks are read
  ASSERT_TRUE(comm.Synchronize().ok());
  ASSERT_TRUE(recorder.ResolveMarks().ok());
  std::vector<TimelineSpan> spans = recorder.Spans();
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_EQ(spans[0].name, "c_allreduce");
  EXPECT_GE(spans[0].start_s, asked - 1e-3);  // on the recorder's clock: after the anchor
  EXPECT_GE(spans[0].end_s - spans[0].start_s, 0.03);
  EXPECT_GT(spans[0].end_s, left);  // the host left the scope before the stream was done
}

TEST(TimelineRecorderTest, MarkedSpansNeedAnAnchorAndAFreshAnchorDropsStaleOnes) {
  TimelineRecorder recorder;
  CpuInlineStream compute;
  { ScopedSpan span(&recorder, {.name = "F0", .category = "forward"}, compute); }
  absl::Status unanchored = recorder.ResolveMarks();
  EXPECT_EQ(unanchored.code(), absl::StatusCode::kFailedPrecondition) << unanchored;
  EXPECT_THAT(std::string(unanchored.message()), ::testing::HasSubstr("anchored"));

  // A run that failed leaves marked spans untimed; the next run's anchor drops them.
  ASSERT_TRUE(recorder.AnchorClock(compute).ok());
  { ScopedSpan stale(&recorder, {.name = "F1", .category = "forward"}, compute); }
  ASSERT_TRUE(recorder.AnchorClock(compute).ok());
  { ScopedSpan span(&recorder, {.name = "F2", .category = "forward"}, compute); }
  ASSERT_TRUE(recorder.ResolveMarks().ok());
  std::vector<TimelineSpan> spans = recorder.Spans();
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_EQ(spans[0].name, "F2");
  EXPECT_LE(spans[0].start_s, spans[0].end_s);
}

}  // namespace
}  // namespace pdist::exec
