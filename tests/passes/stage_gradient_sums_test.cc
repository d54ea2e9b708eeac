// SumStageGradientsOncePerStep: a tied embedding's gradient shares meet once per step, in the
// optimizer job; a gradient of one stage, or one the backward reads, stays where it is.
#include "passes/stage_gradient_sums.h"

#include <gtest/gtest.h>

#include "ir/models/gpt.h"
#include "passes/distributed_programs.h"
#include "passes/dist_state.h"
#include "strategy/strategy.h"

namespace pdist::passes {
namespace {

// The completed global training program of a small GPT under `strategy_json`, built with the
// engine's pipelines up to completion (stage-gradient-sums not yet run).
ir::Program Completed(bool tied, const std::string& strategy_json) {
  ir::models::GptConfig c;
  c.vocab = 64;
  c.hidden = 32;
  c.layers = 4;
  c.heads = 4;
  c.seq_len = 8;
  c.batch = 8;
  c.tied_embeddings = tied;
  ir::Program program = *ir::models::BuildGpt(c);
  const strategy::Strategy strategy = *strategy::ParseStrategy(strategy_json);
  DistributedPipelines pipelines = *DistributedPipelinesFor(strategy, {}, strategy.WorldSize());
  std::vector<PassSpec> upto = pipelines.annotate;
  for (const PassSpec& spec : pipelines.train_tail) {
    upto.push_back(spec);
    if (spec.name == "completion") break;
  }
  PassContext context;
  context.strategy = strategy;
  const absl::Status s = RunPipeline(PrintPipeline(upto), program, context, "test program");
  EXPECT_TRUE(s.ok()) << s;
  return program;
}

constexpr char kVpp[] = R"({"pp_degree": 2, "pipeline": {"schedule_mode": "VPP", "vpp_degree": 2, "accumulate_steps": 4}})";

TEST(StageGradientSumsTest, TheTiedTablesSharesMeetInTheOptimizerJob) {
  ir::Program program = Completed(/*tied=*/true, kVpp);
  const ir::Value* wte = program.FindArgument("gpt.wte");
  ASSERT_NE(wte, nullptr);
  const ir::Operation* sum = program.GradientOf(wte)->producer();
  ASSERT_EQ(sum->type(), "add");
  EXPECT_EQ(sum->role(), ir::OpRole::kBackward);  // before: once per micro-batch
  auto moved = SumStageGradientsOncePerStep(program);
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(*moved, 1);
  EXPECT_EQ(sum->role(), ir::OpRole::kOptimizer);
  int64_t moves = 0;  // the head's share comes by a reshard from the last stage, now in O too
  for (const ir::Value* operand : sum->operands()) {
    const ir::Operation* made_by = operand->producer();
    if (IsReshard(*made_by)) {
      ++moves;
      EXPECT_EQ(made_by->role(), ir::OpRole::kOptimizer);
      EXPECT_NE(made_by->operand(0)->dist_attr()->mesh, sum->result(0)->dist_attr()->mesh);
    } else {
      EXPECT_EQ(made_by->role(), ir::OpRole::kBackward) << made_by->Describe();  // stage 0's share
    }
  }
  EXPECT_EQ(moves, 1);
  // Run again: nothing left to move.
  EXPECT_EQ(*SumStageGradientsOncePerStep(program), 0);
}

TEST(StageGradientSumsTest, UntiedGradientsStayInTheBackward) {
  ir::Program program = Completed(/*tied=*/false, kVpp);
  auto moved = SumStageGradientsOncePerStep(program);
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(*moved, 0);
  for (const ir::StateUpdate& g : program.gradients()) {
    EXPECT_NE(g.new_value->producer()->role(), ir::OpRole::kOptimizer) << g.state->name();
  }
}

}  // namespace
}  // namespace pdist::passes
