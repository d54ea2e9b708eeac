// The round trip: the strategy the planner writes for a CPU cluster of 4 in-process ranks trains
// a small GPT through the engine with the same losses and parameters as one rank (f64, 1e-10),
// for the plan it picks and for the plans it picks under fixed choices (pipelined, interleaved,
// zero-bubble, tensor and sequence parallel), so every kind of plan it writes is one the engine
// runs as priced: stage cuts, micro-batches, schedule.
#include <gtest/gtest.h>

#include "planner/report.h"
#include "planner/search.h"
#include "strategy/strategy.h"
#include "tests/engine/distributed_test_util.h"

namespace pdist::planner {
namespace {

using engine::testing::BuildSmallModel;
using engine::testing::EquivalenceOptions;
using engine::testing::ExpectSameTraining;
using engine::testing::TrainSteps;

constexpr int64_t kSteps = 3;

// 4 CPU "devices" in one node with little memory, so that replicating everything does not fit.
strategy::Cluster CpuCluster(double memory_bytes) {
  strategy::Cluster c;
  c.name = "4 cpu ranks";
  c.devices_per_node = 4;
  c.device = {"cpu", memory_bytes, 20e9, {{"f64", 50e9}, {"f32", 100e9}},
              {.gemm = 0.5, .gemm_half_flops = 1e5, .memory = 0.5, .op_overhead = 1e-6}};
  c.intra_node = c.inter_node = {5e9, 20e-6};
  return c;
}

ir::Program SmallGpt() { return BuildSmallModel("gpt", ir::DataType::kFloat64, /*layers=*/4, /*batch=*/8); }

void ExpectPlanTrainsLikeOneRank(const FixedChoices& fixed, double memory_bytes) {
  PlannedModel model = *ModelFromProgram(SmallGpt(), "small gpt");
  SearchOptions o;
  o.fixed = fixed;
  absl::StatusOr<SearchResult> r = Search(model, CpuCluster(memory_bytes), o);
  ASSERT_TRUE(r.ok()) << r.status();
  const std::string strategy_json = PlanStrategyJson(r->best());
  SCOPED_TRACE(r->best().candidate.ToString());
  ASSERT_TRUE(strategy::ParseStrategy(strategy_json).ok());

  engine::EngineOptions planned = EquivalenceOptions();
  planned.strategy_json = strategy_json;
  const engine::testing::RunOutcome got = TrainSteps(SmallGpt(), planned, kSteps, engine::testing::kSmallVocab);
  const engine::testing::RunOutcome want =
      TrainSteps(SmallGpt(), EquivalenceOptions(), kSteps, engine::testing::kSmallVocab);
  ExpectSameTraining(got, want, SmallGpt(), 1e-10);
}

TEST(RoundTripTest, ThePickTrainsLikeOneRank) { ExpectPlanTrainsLikeOneRank({}, 1e6); }

TEST(RoundTripTest, PipelinedPlansTrainLikeOneRank) {
  ExpectPlanTrainsLikeOneRank({.pp = 2, .schedule = passes::ScheduleMode::k1F1B}, 1e9);
  ExpectPlanTrainsLikeOneRank({.pp = 4, .schedule = passes::ScheduleMode::kZBH1}, 1e9);
  ExpectPlanTrainsLikeOneRank({.pp = 2, .vpp = 2, .schedule = passes::ScheduleMode::kVPP}, 1e9);
}

TEST(RoundTripTest, TensorAndSequenceParallelPlansTrainLikeOneRank) {
  ExpectPlanTrainsLikeOneRank({.mp = 2, .sp = true}, 1e9);
  ExpectPlanTrainsLikeOneRank({.mp = 4, .sp = false}, 1e9);
}

}  // namespace
}  // namespace pdist::planner
