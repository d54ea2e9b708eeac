// Sequence parallelism keeps the norms' and dropouts' activations on a sequence shard: in rank
// 0's local training program of one GPT layer under mp 2, the bytes those forward ops produce
// halve with sp (issue 14's measure; docs/strategy.md records the numbers).
#include <gtest/gtest.h>

#include <cstdio>
#include <set>

#include "ir/models/gpt.h"
#include "passes/distributed_programs.h"

namespace pdist::passes {
namespace {

struct ForwardBytes {
  int64_t norms_and_dropouts = 0;
  int64_t all = 0;  // every forward activation
  int64_t kept = 0;  // forward values the backward reads: what a micro-batch keeps between them
  int64_t gathered_kept = 0;  // of which the results of forward all-gathers
};

ForwardBytes OfRankZero(bool sp) {
  ir::models::GptConfig cfg;
  cfg.vocab = 64;
  cfg.hidden = 32;
  cfg.layers = 1;
  cfg.heads = 4;
  cfg.seq_len = 16;
  cfg.batch = 2;
  cfg.dropout = 0.1;
  absl::StatusOr<ir::Program> forward = ir::models::BuildGpt(cfg);
  EXPECT_TRUE(forward.ok()) << forward.status();
  strategy::Strategy s;
  s.mp_degree = 2;
  s.sp = sp;
  absl::StatusOr<DistributedPrograms> programs = BuildDistributedPrograms(*forward, s, OptimizerConfig{});
  EXPECT_TRUE(programs.ok()) << programs.status();
  ReshardPlanCache plans;
  absl::StatusOr<ir::Program> local = LocalProgram(programs->train, RankPipeline(0, std::nullopt), plans);
  EXPECT_TRUE(local.ok()) << local.status();
  ForwardBytes bytes;
  std::set<const ir::Value*> kept;
  for (const auto& op : local->block().ops()) {
    if (op->role() == ir::OpRole::kForward) continue;
    for (const ir::Value* v : op->operands()) {
      if (v == nullptr || v->producer() == nullptr || v->producer()->role() != ir::OpRole::kForward) continue;
      if (!kept.insert(v).second) continue;
      bytes.kept += v->type().num_bytes();
      if (v->producer()->type() == "c_allgather") bytes.gathered_kept += v->type().num_bytes();
    }
  }
  for (const auto& op : local->block().ops()) {
    if (op->role() != ir::OpRole::kForward) continue;
    const bool counted = op->type() == "layer_norm" || op->type() == "dropout" || op->type() == "c_dropout";
    for (const ir::Value* r : op->results()) {
      bytes.all += r->type().num_bytes();
      if (counted) bytes.norms_and_dropouts += r->type().num_bytes();
    }
  }
  return bytes;
}

TEST(SequenceParallelMemoryTest, NormAndDropoutActivationsHalveOverTwoTensorParallelRanks) {
  const ForwardBytes without = OfRankZero(false), with = OfRankZero(true);
  std::printf("one GPT layer, rank 0 of mp 2: norm + dropout forward bytes %lld without sp, %lld with; "
              "all forward activations %lld without, %lld with\n",
              static_cast<long long>(without.norms_and_dropouts), static_cast<long long>(with.norms_and_dropouts),
              static_cast<long long>(without.all), static_cast<long long>(with.all));
  ASSERT_GT(with.norms_and_dropouts, 0);
  EXPECT_EQ(without.norms_and_dropouts, 2 * with.norms_and_dropouts);
  EXPECT_LT(with.all, without.all);
}

// What the backward keeps: under sp the norm outputs feeding the column-parallel matmuls stay
// sequence shards and the backward all-gathers them again (passes/regather.h), as Megatron-LM
// does, so no forward all-gather's result is kept.
TEST(SequenceParallelMemoryTest, TheBackwardKeepsSequenceShardsAndGathersThemAgain) {
  const ForwardBytes without = OfRankZero(false), with = OfRankZero(true);
  std::printf("one GPT layer, rank 0 of mp 2: forward values the backward keeps %lld bytes without sp, %lld with "
              "(%lld of them all-gathered)\n",
              static_cast<long long>(without.kept), static_cast<long long>(with.kept),
              static_cast<long long>(with.gathered_kept));
  EXPECT_EQ(with.gathered_kept, 0);
  EXPECT_LT(with.kept, without.kept * 85 / 100);
}

}  // namespace
}  // namespace pdist::passes
