// Pipeline schedules: the exact job lists of small cases, properties of every mode over many
// shapes (each job once, order within a chunk, no deadlock, the closed-form makespan, bubble
// and peak memory), the simulator's timing, deadlock and malformed-list errors, bad shapes.
#include "passes/pipeline_schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "passes/schedules/schedule_def.h"

namespace pdist::passes {
namespace {

using ir::JobKind;
using ir::PipelineJob;
using Lists = std::vector<std::vector<PipelineJob>>;

constexpr ScheduleMode kAllModes[] = {ScheduleMode::kFThenB, ScheduleMode::k1F1B, ScheduleMode::kVPP,
                                      ScheduleMode::kZBH1};

// The schedule of one stage as text, or the error message.
std::string Sched(ScheduleMode mode, int64_t p, int64_t m, int64_t v, int64_t stage) {
  auto jobs = BuildSchedule(mode, {p, m, v}, stage);
  if (!jobs.ok()) return std::string(jobs.status().message());
  return JobsToString(*jobs);
}

Lists AllStages(ScheduleMode mode, const ScheduleShape& shape) {
  Lists lists;
  for (int64_t s = 0; s < shape.stages; ++s) lists.push_back(BuildSchedule(mode, shape, s).value());
  return lists;
}

PipelineJob F(int64_t mb, int64_t chunk = 0) { return {JobKind::kForward, mb, chunk}; }
PipelineJob B(int64_t mb, int64_t chunk = 0) { return {JobKind::kBackward, mb, chunk}; }
PipelineJob BI(int64_t mb) { return {JobKind::kBackwardInput, mb, 0}; }
PipelineJob W(int64_t mb) { return {JobKind::kBackwardWeight, mb, 0}; }
const PipelineJob O{JobKind::kOptimizer, 0, 0};

TEST(PipelineScheduleTest, ModeNamesRoundTrip) {
  for (ScheduleMode mode : kAllModes) {
    auto parsed = ParseScheduleMode(ScheduleModeName(mode));
    ASSERT_TRUE(parsed.ok()) << ScheduleModeName(mode);
    EXPECT_EQ(*parsed, mode);
  }
  EXPECT_STREQ(ScheduleModeName(ScheduleMode::k1F1B), "1F1B");
  auto bad = ParseScheduleMode("1f1b-eager");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "unknown pipeline schedule \"1f1b-eager\"; valid: FThenB, 1F1B, VPP, ZBH1");
}

// Every mode has exactly one definition, and what the definitions say they do is what their job
// lists do: a schedule that splits the backward emits W jobs and no B, the others B and no W.
TEST(PipelineScheduleTest, EveryModeIsDefinedOnceAndDoesWhatItsDefinitionSays) {
  EXPECT_EQ(ScheduleDefs().size(), std::size(kAllModes));
  for (ScheduleMode mode : kAllModes) {
    const ScheduleDef& def = ScheduleDefOf(mode);
    EXPECT_EQ(def.mode, mode);
    EXPECT_EQ(std::count_if(ScheduleDefs().begin(), ScheduleDefs().end(),
                            [&](const ScheduleDef& d) { return d.mode == mode; }),
              1);
    const ScheduleShape shape{2, 4, def.interleaves_chunks ? 2 : 1};
    const std::vector<PipelineJob> jobs = BuildSchedule(mode, shape, 1).value();
    const auto has = [&](JobKind kind) {
      return std::any_of(jobs.begin(), jobs.end(), [&](const PipelineJob& j) { return j.kind == kind; });
    };
    EXPECT_EQ(has(JobKind::kBackwardWeight), def.splits_backward) << def.name;
    EXPECT_EQ(has(JobKind::kBackward), !def.splits_backward) << def.name;
    EXPECT_EQ(std::any_of(jobs.begin(), jobs.end(), [](const PipelineJob& j) { return j.chunk > 0; }),
              def.interleaves_chunks)
        << def.name;
  }
}

TEST(PipelineScheduleTest, FThenB) {
  EXPECT_EQ(Sched(ScheduleMode::kFThenB, 2, 3, 1, 0), "F0 F1 F2 B0 B1 B2 O");
  EXPECT_EQ(Sched(ScheduleMode::kFThenB, 2, 3, 1, 1), "F0 F1 F2 B0 B1 B2 O");
}

TEST(PipelineScheduleTest, OneFOneB) {
  EXPECT_EQ(Sched(ScheduleMode::k1F1B, 2, 4, 1, 0), "F0 F1 B0 F2 B1 F3 B2 B3 O");
  EXPECT_EQ(Sched(ScheduleMode::k1F1B, 2, 4, 1, 1), "F0 B0 F1 B1 F2 B2 F3 B3 O");
  EXPECT_EQ(Sched(ScheduleMode::k1F1B, 4, 4, 1, 0), "F0 F1 F2 F3 B0 B1 B2 B3 O");
  EXPECT_EQ(Sched(ScheduleMode::k1F1B, 4, 4, 1, 2), "F0 F1 B0 F2 B1 F3 B2 B3 O");
  // Fewer micro-batches than warm-up slots: all forwards, then all backwards.
  EXPECT_EQ(Sched(ScheduleMode::k1F1B, 4, 2, 1, 0), "F0 F1 B0 B1 O");
  EXPECT_EQ(Sched(ScheduleMode::k1F1B, 1, 3, 1, 0), "F0 B0 F1 B1 F2 B2 O");
}

TEST(PipelineScheduleTest, Interleaved) {
  // Stage 0 warms up with 2·(p-1) + (v-1)·p = 4 forward steps, stage 1 with 2.
  EXPECT_EQ(Sched(ScheduleMode::kVPP, 2, 4, 2, 0),
            "F0 F1 F0.1 F1.1 F2 B0.1 F3 B1.1 F2.1 B0 F3.1 B1 B2.1 B3.1 B2 B3 O");
  EXPECT_EQ(Sched(ScheduleMode::kVPP, 2, 4, 2, 1),
            "F0 F1 F0.1 B0.1 F1.1 B1.1 F2 B0 F3 B1 F2.1 B2.1 F3.1 B3.1 B2 B3 O");
  // m == p: every forward first (Megatron's all-warm-up case).
  EXPECT_EQ(Sched(ScheduleMode::kVPP, 2, 2, 2, 1), "F0 F1 F0.1 F1.1 B0.1 B1.1 B0 B1 O");
}

TEST(PipelineScheduleTest, ZeroBubbleH1) {
  EXPECT_EQ(Sched(ScheduleMode::kZBH1, 3, 4, 1, 0), "F0 F1 F2 B0 W0 F3 B1 W1 B2 W2 B3 W3 O");
  EXPECT_EQ(Sched(ScheduleMode::kZBH1, 3, 4, 1, 1), "F0 F1 B0 F2 B1 W0 F3 B2 W1 B3 W2 W3 O");
  EXPECT_EQ(Sched(ScheduleMode::kZBH1, 3, 4, 1, 2), "F0 B0 F1 B1 F2 B2 W0 F3 B3 W1 W2 W3 O");
  // The B's are backward-input jobs (they print like B).
  auto jobs = BuildSchedule(ScheduleMode::kZBH1, {2, 1, 1}, 1).value();
  EXPECT_EQ(jobs, (std::vector<PipelineJob>{F(0), BI(0), W(0), O}));
  EXPECT_EQ(JobsToString({}), "");
}

TEST(PipelineScheduleTest, BadShapes) {
  auto error = [](ScheduleMode mode, ScheduleShape shape, int64_t stage = 0) {
    absl::Status status = BuildSchedule(mode, shape, stage).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_EQ(CheckScheduleShape(mode, shape).ok(), stage != 0);  // the bad shapes below use stage 0
    return std::string(status.message());
  };
  EXPECT_EQ(error(ScheduleMode::kVPP, {2, 5, 2}),
            "VPP needs micro_batches divisible by stages, got micro_batches=5, stages=2 (pipeline.accumulate_steps, pp_degree)");
  EXPECT_EQ(error(ScheduleMode::kVPP, {2, 4, 1}), "VPP needs chunks >= 2, got chunks=1");
  EXPECT_EQ(error(ScheduleMode::k1F1B, {2, 4, 2}), "1F1B runs one chunk per stage, got chunks=2 (pipeline.vpp_degree; only VPP interleaves)");
  EXPECT_EQ(error(ScheduleMode::kFThenB, {0, 4, 1}), "stages must be >= 1, got 0");
  EXPECT_EQ(error(ScheduleMode::kZBH1, {2, 0, 1}), "micro_batches must be >= 1, got 0");
  EXPECT_EQ(error(ScheduleMode::kVPP, {2, 4, 0}), "chunks must be >= 1, got 0");
  EXPECT_EQ(error(ScheduleMode::k1F1B, {2, 4, 1}, 2), "stage 2 is outside [0, 2)");
  EXPECT_EQ(error(ScheduleMode::k1F1B, {2, 4, 1}, -1), "stage -1 is outside [0, 2)");
}

// Every valid shape with p ≤ 6, m ≤ 12, v ≤ 3, each stage checked against the definitions.
TEST(PipelineScheduleTest, PropertiesOverManyShapes) {
  int shapes = 0;
  for (ScheduleMode mode : kAllModes) {
    for (int64_t p = 1; p <= 6; ++p) {
      for (int64_t m = 1; m <= 12; ++m) {
        for (int64_t v = 1; v <= 3; ++v) {
          const ScheduleShape shape{p, m, v};
          if (!CheckScheduleShape(mode, shape).ok()) continue;
          ++shapes;
          SCOPED_TRACE(::testing::Message() << ScheduleModeName(mode) << " p=" << p << " m=" << m << " v=" << v);
          const Lists lists = AllStages(mode, shape);
          for (int64_t s = 0; s < p; ++s) {
            SCOPED_TRACE(::testing::Message() << "stage " << s << ": " << JobsToString(lists[s]));
            const std::vector<PipelineJob>& jobs = lists[s];
            ASSERT_FALSE(jobs.empty());
            EXPECT_EQ(jobs.back(), O);
            std::map<std::tuple<JobKind, int64_t, int64_t>, int> count;
            std::map<std::pair<JobKind, int64_t>, int64_t> last_mb;  // per (kind, chunk)
            for (size_t i = 0; i + 1 < jobs.size(); ++i) {
              const PipelineJob& job = jobs[i];
              ASSERT_NE(job.kind, JobKind::kOptimizer);
              ASSERT_TRUE(job.micro_batch >= 0 && job.micro_batch < m && job.chunk >= 0 && job.chunk < v);
              ++count[{job.kind, job.micro_batch, job.chunk}];
              auto [it, fresh] = last_mb.try_emplace({job.kind, job.chunk}, -1);
              EXPECT_EQ(job.micro_batch, it->second + 1) << job.ToString() << " out of micro-batch order";
              it->second = job.micro_batch;
            }
            const bool split = mode == ScheduleMode::kZBH1;
            for (int64_t mb = 0; mb < m; ++mb) {
              for (int64_t c = 0; c < v; ++c) {
                EXPECT_EQ((count[{JobKind::kForward, mb, c}]), 1);
                EXPECT_EQ((count[{JobKind::kBackward, mb, c}]), split ? 0 : 1);
                EXPECT_EQ((count[{JobKind::kBackwardInput, mb, c}]), split ? 1 : 0);
                EXPECT_EQ((count[{JobKind::kBackwardWeight, mb, c}]), split ? 1 : 0);
              }
            }
            if (split) {
              // ZBH1 is 1F1B once the W's are dropped; its last B is followed by the W that
              // trails it by s micro-batches (when there is one) and the min(s, m) left over.
              std::vector<PipelineJob> without_w;
              for (PipelineJob job : jobs) {
                if (job.kind == JobKind::kBackwardInput) job.kind = JobKind::kBackward;
                if (job.kind != JobKind::kBackwardWeight) without_w.push_back(job);
              }
              EXPECT_EQ(JobsToString(without_w), Sched(ScheduleMode::k1F1B, p, m, 1, s));
              const auto last_non_w = std::find_if(jobs.rbegin() + 1, jobs.rend(), [](const PipelineJob& job) {
                return job.kind != JobKind::kBackwardWeight;
              });
              EXPECT_EQ(last_non_w - jobs.rbegin() - 1, std::min(s + 1, m));
            }
          }

          // F=1, B=2 (split 1+1), no p2p.
          auto sim = SimulateSchedule(lists, shape, JobCosts{});
          ASSERT_TRUE(sim.ok()) << sim.status();
          ASSERT_EQ(sim->stages.size(), static_cast<size_t>(p));
          for (int64_t s = 0; s < p; ++s) {
            ASSERT_EQ(sim->stages[s].size(), lists[s].size());
            for (size_t i = 1; i < sim->stages[s].size(); ++i) {
              EXPECT_GE(sim->stages[s][i].start, sim->stages[s][i - 1].end);
            }
          }
          const double pd = static_cast<double>(p), md = static_cast<double>(m), vd = static_cast<double>(v);
          for (int64_t s = 0; s < p; ++s) {
            SCOPED_TRACE(::testing::Message() << "stage " << s);
            const int64_t peak = sim->peak_in_flight[s];
            switch (mode) {
              case ScheduleMode::kFThenB:
              case ScheduleMode::k1F1B:
                EXPECT_DOUBLE_EQ(sim->makespan, (md + pd - 1) * 3);
                EXPECT_NEAR(sim->bubble_fraction[s], (pd - 1) / (md + pd - 1), 1e-12);
                EXPECT_EQ(peak, mode == ScheduleMode::kFThenB ? m : std::min(p - s, m));
                break;
              case ScheduleMode::kVPP: {
                // Megatron: bubble time (p-1)·(t_F + t_B)/v with t = a whole stage's times, i.e.
                // (p-1)·(F+B) in chunk jobs, over a busy time of v·m·(F+B).
                EXPECT_DOUBLE_EQ(sim->makespan, (vd * md + pd - 1) * 3);
                EXPECT_NEAR(sim->bubble_fraction[s], (pd - 1) / (vd * md + pd - 1), 1e-12);
                EXPECT_LE(sim->bubble_fraction[s], (pd - 1) / (md + pd - 1) + 1e-12);  // 1F1B's
                const int64_t warmup = m == p ? m * v : std::min(2 * (p - s - 1) + (v - 1) * p, m * v);
                EXPECT_EQ(peak, std::min(warmup + 1, m * v));
                break;
              }
              case ScheduleMode::kZBH1:
                // Zero-bubble paper: ZB-H1's bubble is (p-1)·(F + B_input - W) once m ≥ p.
                if (m >= p) {
                  EXPECT_DOUBLE_EQ(sim->makespan, 3 * md + (pd - 1));
                }
                if (p > 1) {
                  EXPECT_LT(sim->makespan, (md + pd - 1) * 3);  // 1F1B's
                }
                // Each stage holds as many activations as 1F1B's stage 0, never more.
                EXPECT_EQ(peak, std::min(p, m));
                break;
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(shapes, 3 * 6 * 12 + 2 * (12 + 6 + 4 + 3 + 2 + 2));
}

// With model chunks that keep different amounts (the one holding the head keeps more), the bytes
// alive peak below the largest chunk's times the most (micro-batch, chunk) pairs alive: the sum
// over the pairs alive at each moment, brute-forced here from the set of pairs each stage holds.
TEST(PipelineScheduleTest, AliveBytesWeighEachChunkByWhatItKeeps) {
  for (const ScheduleShape shape : {ScheduleShape{4, 8, 2}, ScheduleShape{2, 4, 3}, ScheduleShape{4, 4, 4}}) {
    SCOPED_TRACE(::testing::Message() << shape.stages << " stages, " << shape.micro_batches << " micro-batches, "
                                      << shape.chunks << " chunks");
    std::vector<JobCosts> costs(static_cast<size_t>(shape.stages * shape.chunks));
    for (size_t k = 0; k < costs.size(); ++k) costs[k].activation_bytes = k + 1 == costs.size() ? 100 : 1 + k % 3;
    const Lists lists = AllStages(ScheduleMode::kVPP, shape);
    auto sim = SimulateSchedule(lists, shape, costs);
    ASSERT_TRUE(sim.ok()) << sim.status();
    bool below_the_bound = false;
    for (int64_t s = 0; s < shape.stages; ++s) {
      std::set<std::pair<int64_t, int64_t>> alive;  // (micro-batch, chunk)
      double peak = 0, largest = 0;
      for (const SimulatedJob& job : sim->stages[s]) {
        const double bytes = costs[job.job.chunk * shape.stages + s].activation_bytes;
        largest = std::max(largest, bytes);
        if (job.job.kind == JobKind::kForward) alive.insert({job.job.micro_batch, job.job.chunk});
        if (job.job.kind == JobKind::kBackward) alive.erase({job.job.micro_batch, job.job.chunk});
        double sum = 0;
        for (const auto& [mb, chunk] : alive) sum += costs[chunk * shape.stages + s].activation_bytes;
        peak = std::max(peak, sum);
      }
      EXPECT_DOUBLE_EQ(sim->peak_alive_bytes[s], peak) << "stage " << s;
      EXPECT_LE(sim->peak_alive_bytes[s], largest * static_cast<double>(sim->peak_in_flight[s]));
      below_the_bound |= sim->peak_alive_bytes[s] < largest * static_cast<double>(sim->peak_in_flight[s]);
    }
    EXPECT_TRUE(below_the_bound);
  }
  // Equal chunks: the bytes are the count times what one keeps.
  const ScheduleShape shape{4, 8, 2};
  std::vector<JobCosts> costs(8);
  for (JobCosts& c : costs) c.activation_bytes = 3;
  auto sim = SimulateSchedule(AllStages(ScheduleMode::kVPP, shape), shape, costs);
  ASSERT_TRUE(sim.ok()) << sim.status();
  for (int64_t s = 0; s < 4; ++s) EXPECT_DOUBLE_EQ(sim->peak_alive_bytes[s], 3.0 * sim->peak_in_flight[s]);
  costs[5].activation_bytes = -1;
  EXPECT_FALSE(SimulateSchedule(AllStages(ScheduleMode::kVPP, shape), shape, costs).ok());
}

TEST(PipelineScheduleTest, SimulatedTimes) {
  // The header's example: 1F1B, 2 stages, 2 micro-batches.
  const Lists lists = AllStages(ScheduleMode::k1F1B, {2, 2, 1});
  auto sim = SimulateSchedule(lists, {2, 2, 1}, JobCosts{});
  ASSERT_TRUE(sim.ok()) << sim.status();
  auto times = [&](int64_t s) {
    std::string text;
    for (const SimulatedJob& job : sim->stages[s]) {
      text += job.job.ToString() + "[" + std::to_string(static_cast<int>(job.start)) + "," +
              std::to_string(static_cast<int>(job.end)) + ") ";
    }
    return text;
  };
  EXPECT_EQ(times(0), "F0[0,1) F1[1,2) B0[4,6) B1[7,9) O[9,9) ");
  EXPECT_EQ(times(1), "F0[1,2) B0[2,4) F1[4,5) B1[5,7) O[7,7) ");
  EXPECT_EQ(sim->makespan, 9);
  EXPECT_EQ(sim->peak_in_flight, (std::vector<int64_t>{2, 1}));
  // Stage 0's two micro-batches are alive at its first backward, one at its second; stage 1
  // holds one at each.
  EXPECT_EQ(sim->alive_at_first_backward, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(sim->alive_at_later_backwards, (std::vector<int64_t>{1, 1}));
  // ZBH1 counts the split backward's B; its W frees the micro-batch.
  auto split = SimulateSchedule(AllStages(ScheduleMode::kZBH1, {3, 4, 1}), {3, 4, 1}, JobCosts{});
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_EQ(split->alive_at_first_backward, (std::vector<int64_t>{3, 2, 1}));

  // p2p delays each hop between stages; the optimizer's cost ends each stage.
  JobCosts costs{.forward = 1, .backward = 2, .optimizer = 0.25, .p2p = 0.5};
  auto slow = SimulateSchedule(AllStages(ScheduleMode::k1F1B, {2, 1, 1}), {2, 1, 1}, costs);
  ASSERT_TRUE(slow.ok()) << slow.status();
  EXPECT_DOUBLE_EQ(slow->stages[1][0].start, 1.5);  // F0 on stage 1
  EXPECT_DOUBLE_EQ(slow->stages[0][1].start, 5);    // B0 on stage 0: 1.5 + 1 + 2 + 0.5
  EXPECT_DOUBLE_EQ(slow->makespan, 7.25);
  EXPECT_DOUBLE_EQ(slow->bubble_fraction[0], (7.25 - 3.25) / 7.25);
}

TEST(PipelineScheduleTest, ZeroBubbleFillsTheTailWithWeightGradients) {
  // With a costly W, ZBH1 still beats 1F1B: the W's of later stages run while stage 0 finishes.
  JobCosts costs{.forward = 1, .backward = 3, .backward_input = 1, .backward_weight = 2};
  auto zb = SimulateSchedule(AllStages(ScheduleMode::kZBH1, {4, 8, 1}), {4, 8, 1}, costs);
  auto base = SimulateSchedule(AllStages(ScheduleMode::k1F1B, {4, 8, 1}), {4, 8, 1}, costs);
  ASSERT_TRUE(zb.ok() && base.ok());
  EXPECT_DOUBLE_EQ(base->makespan, (8 + 3) * 4);
  EXPECT_LT(zb->makespan, base->makespan);
}

TEST(PipelineScheduleTest, DeadlockNamesTheStuckJobs) {
  // Stage 0 runs B0 before its own F0; stage 1 waits for that F0.
  auto early = SimulateSchedule({{B(0), F(0), O}, {F(0), B(0), O}}, {2, 1, 1}, JobCosts{});
  EXPECT_EQ(early.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(early.status().message(),
            "pipeline schedule deadlocks: stage 0 stuck at job 0 (B0) waiting for F0 on stage 0; "
            "stage 1 stuck at job 0 (F0) waiting for F0 on stage 0");

  // A cyclic wait: stage 0 wants B0 before sending F1, stage 1 wants F1 before B0.
  auto cycle = SimulateSchedule({{F(0), B(0), F(1), B(1), O}, {F(0), F(1), B(1), B(0), O}}, {2, 2, 1}, JobCosts{});
  EXPECT_EQ(cycle.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(cycle.status().message(),
            "pipeline schedule deadlocks: stage 0 stuck at job 1 (B0) waiting for B0 on stage 1; "
            "stage 1 stuck at job 1 (F1) waiting for F1 on stage 0");

  // Between chunks of one stage too (p = 1, v = 2): B0.1 first needs F0.1.
  auto chunks = SimulateSchedule({{F(0), B(0, 1), F(0, 1), B(0), O}}, {1, 1, 2}, JobCosts{});
  EXPECT_EQ(chunks.status().message(),
            "pipeline schedule deadlocks: stage 0 stuck at job 1 (B0.1) waiting for F0.1 on stage 0");
}

TEST(PipelineScheduleTest, MalformedLists) {
  auto message = [](const Lists& lists, ScheduleShape shape, JobCosts costs = {}) {
    absl::Status status = SimulateSchedule(lists, shape, costs).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    return std::string(status.message());
  };
  EXPECT_EQ(message({{F(0), B(0), O}}, {2, 1, 1}), "got job lists for 1 stages, want 2");
  EXPECT_EQ(message({{F(0), O}}, {1, 1, 1}),
            "stage 0, micro-batch 0, chunk 0: want one F and one B (or one B-input and one W), got 1 F, 0 B, 0 B-input, 0 W");
  EXPECT_EQ(message({{F(0), F(0), B(0), O}}, {1, 1, 1}),
            "stage 0, micro-batch 0, chunk 0: want one F and one B (or one B-input and one W), got 2 F, 1 B, 0 B-input, 0 W");
  EXPECT_EQ(message({{F(0), B(0), W(0), O}}, {1, 1, 1}),
            "stage 0, micro-batch 0, chunk 0: want one F and one B (or one B-input and one W), got 1 F, 1 B, 0 B-input, 1 W");
  EXPECT_EQ(message({{F(0), BI(0), O}}, {1, 1, 1}),
            "stage 0, micro-batch 0, chunk 0: want one F and one B (or one B-input and one W), got 1 F, 0 B, 1 B-input, 0 W");
  EXPECT_EQ(message({{F(0), B(0), F(1), B(1), O}}, {1, 1, 1}),
            "stage 0: job F1 is outside micro_batches=1, chunks=1");
  EXPECT_EQ(message({{F(0), B(0), O, O}}, {1, 1, 1}), "stage 0 has more than one O");
  EXPECT_EQ(message({{F(0), B(0), O}}, {1, 1, 1}, {.p2p = -1}), "job costs must be >= 0, got -1");
  // A list without O is fine: the cost model may time the micro-batch jobs alone.
  EXPECT_TRUE(SimulateSchedule({{F(0), BI(0), W(0)}}, {1, 1, 1}, JobCosts{}).ok());
}

}  // namespace
}  // namespace pdist::passes
