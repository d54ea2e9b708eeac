// Virtual stages: devices numbered as the engine numbers ranks, and the job costs the schedule's
// simulator gets, including ZBH1's first stage, whose whole backward is W.
#include "planner/virtual_stage.h"

#include <gtest/gtest.h>

#include "planner/planned_model.h"

namespace pdist::planner {
namespace {

TEST(VirtualStageTest, DevicesAreNumberedStageThenReplicaThenTensorRank) {
  const Candidate c{.dp = 2, .mp = 2, .pp = 2};
  EXPECT_EQ(DeviceOf(c, 0, 0, 0), 0);
  EXPECT_EQ(DeviceOf(c, 0, 1, 0), 2);
  EXPECT_EQ(DeviceOf(c, 1, 1, 1), 7);
  EXPECT_EQ(DataParallelGroup(c, 1), (std::vector<int64_t>{4, 6}));
}

TEST(VirtualStageTest, ZeroBubbleFirstStageRunsItsWholeBackwardAsWeightGradients) {
  const PlannedModel model = *ModelFromSpec("gpt:layers=4,hidden=64,heads=4,vocab=128,seq=16", 8);
  const strategy::Cluster cluster = *strategy::ClusterPreset("dgx-a100", 2);
  Profiler profiler(model, cluster);
  const ModelProfile& profile = **profiler.Get({.mp = 1, .sp = false, .micro_batch = 2});
  const StageLayout layout = *LayoutStages(profile, model, 2);
  const Candidate one_f_one_b{.pp = 2, .micro_batch = 2, .micro_batches = 4};
  Candidate zbh1 = one_f_one_b;
  zbh1.schedule = passes::ScheduleMode::kZBH1;
  for (int64_t k = 0; k < 2; ++k) {
    const VirtualStage plain = PriceVirtualStage(one_f_one_b, model, profile, nullptr, layout.stages[k], k, cluster);
    const VirtualStage zb = PriceVirtualStage(zbh1, model, profile, nullptr, layout.stages[k], k, cluster);
    ASSERT_GT(plain.jobs.backward_input, 0) << k;
    ASSERT_GT(plain.jobs.backward_weight, 0) << k;
    EXPECT_DOUBLE_EQ(zb.jobs.backward, plain.jobs.backward) << k;
    EXPECT_DOUBLE_EQ(zb.jobs.forward, plain.jobs.forward) << k;
    if (k == 0) {  // nothing upstream waits for its input gradients
      EXPECT_EQ(zb.jobs.backward_input, 0);
      EXPECT_DOUBLE_EQ(zb.jobs.backward_weight, plain.jobs.backward);
    } else {
      EXPECT_DOUBLE_EQ(zb.jobs.backward_input, plain.jobs.backward_input);
      EXPECT_DOUBLE_EQ(zb.jobs.backward_weight, plain.jobs.backward_weight);
    }
  }
}

}  // namespace
}  // namespace pdist::planner
