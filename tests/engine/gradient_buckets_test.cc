// Gradient buckets and the communication stream: the all-reduces of a data-parallel program are
// fused into buckets by size, never past a use of their results, and neither buckets nor the
// overlap of communication with compute change a single bit of the training.
#include <gtest/gtest.h>

#include "passes/distributed_programs.h"
#include "ir/models/gpt.h"
#include "passes/fuse_allreduce.h"
#include "passes/partition.h"
#include "tests/engine/distributed_test_util.h"

namespace pdist::engine {
namespace {

ir::Program SmallGpt() {
  ir::models::GptConfig c;
  c.vocab = 64;
  c.hidden = 32;
  c.layers = 2;
  c.heads = 4;
  c.seq_len = 8;
  c.batch = 4;
  return *ir::models::BuildGpt(c);
}

ir::Program RankZeroOfDp2() {
  strategy::Strategy s;
  s.dp_degree = 2;
  auto programs = BuildDistributedPrograms(SmallGpt(), s, passes::OptimizerConfig{});
  EXPECT_TRUE(programs.ok()) << programs.status();
  passes::ReshardPlanCache plans;
  return *passes::PartitionProgram(programs->train, 0, plans);
}

int64_t Count(const ir::Program& p, const std::string& type, int64_t* members = nullptr) {
  int64_t n = 0;
  for (const auto& op : p.block().ops()) {
    if (op->type() != type) continue;
    ++n;
    if (members != nullptr) *members += static_cast<int64_t>(op->num_operands());
  }
  return n;
}

TEST(GradientBucketsTest, FusesByBucketSize) {
  const ir::Program base = RankZeroOfDp2();
  const int64_t singles = Count(base, "c_allreduce");
  ASSERT_GT(singles, 10);  // one per parameter gradient, at least

  ir::Program one = base.Clone();
  auto made = passes::ScheduleGradientAllReduces(one, int64_t{1} << 30);
  ASSERT_TRUE(made.ok()) << made.status();
  int64_t members = 0;
  EXPECT_EQ(Count(one, "c_allreduce_coalesced", &members), *made);
  EXPECT_EQ(members + Count(one, "c_allreduce"), singles);  // nothing lost
  EXPECT_LE(*made, 2);  // everything that can wait for the end of the backward shares a bucket

  ir::Program small = base.Clone();
  auto many = passes::ScheduleGradientAllReduces(small, 8 * 1024);
  ASSERT_TRUE(many.ok());
  EXPECT_GT(*many, *made);

  ir::Program none = base.Clone();
  EXPECT_EQ(*passes::ScheduleGradientAllReduces(none, 0), 0);
  EXPECT_EQ(Count(none, "c_allreduce"), singles);
}

TEST(GradientBucketsTest, BucketsAndOverlapChangeNoBit) {
  const ir::Program model = SmallGpt();
  EngineOptions plain;
  plain.strategy_json = R"({"dp_degree": 2, "mp_degree": 2})";
  plain.lr.base = 1e-3;
  plain.overlap_communication = false;
  plain.gradient_bucket_bytes = 0;
  EngineOptions fused = plain;
  fused.overlap_communication = true;
  fused.gradient_bucket_bytes = 4096;
  const testing::RunOutcome a = testing::TrainSteps(model.Clone(), plain, 4, 64);
  const testing::RunOutcome b = testing::TrainSteps(model.Clone(), fused, 4, 64);
  ASSERT_EQ(a.losses.size(), 4u);
  EXPECT_EQ(a.losses, b.losses);
  for (const auto& [name, tensor] : a.state) {
    EXPECT_EQ(exec::TensorToDoubles(tensor), exec::TensorToDoubles(b.state.at(name))) << name;
  }
}

}  // namespace
}  // namespace pdist::engine
