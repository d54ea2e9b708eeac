// SumStageGradientsOncePerStep: a tied embedding's gradient shares meet once per step, in the
// optimizer job; a gradient of one stage, or one the backward reads, stays where it is.
#include "passes/stage_gradient_sums.h"

#include <gtest/gtest.h>

#include "ir/builder.h"
#include "ir/dist/process_mesh.h"
#include "ir/models/gpt.h"
#include "passes/distributed_programs.h"
#include "passes/dist_state.h"
#include "strategy/strategy.h"
#include "tests/engine/distributed_test_util.h"

namespace pdist::passes {
namespace {

// The completed global training program of a small GPT under `strategy_json`, built with the
// engine's pipelines up to completion (stage-gradient-sums not yet run).
ir::Program Completed(bool tied, const std::string& strategy_json) {
  auto c = engine::testing::SmallConfig<ir::models::GptConfig>(ir::DataType::kFloat32, /*layers=*/4, /*batch=*/8);
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

// By hand, after completion: w on process 0, a share of its gradient made on process 1 and
// moved to 0, summed with process 0's share. `backward_reader`: a backward op also reads the sum.
struct HandMade {
  ir::Program program;
  ir::Operation* sum = nullptr;
  ir::Operation* move = nullptr;
};

HandMade TwoStageGradient(bool backward_reader) {
  HandMade h;
  ir::Builder b(&h.program);
  const ir::ProcessMesh first = *ir::ProcessMesh::Create({1}, {0}, {"x"});
  const ir::ProcessMesh second = *ir::ProcessMesh::Create({1}, {1}, {"x"});
  const ir::TensorType type{{4}, ir::DataType::kFloat32};
  auto on = [](ir::Value* v, const ir::ProcessMesh& mesh) {
    v->set_dist_attr(ir::DistAttr::Replicated(mesh, 1));
    return v;
  };
  ir::Value* w = on(b.Parameter("w", type, "zeros"), first);
  ir::Value* x0 = on(b.Data("x0", type), first);
  ir::Value* x1 = on(b.Data("x1", type), second);
  b.set_op_role(ir::OpRole::kBackward);
  b.set_result_role(ir::ValueRole::kGradient);
  ir::Value* share1 = on(*b.Op1("scale", {x1}, {{"scale", 2.0}}), second);
  ir::Value* moved = on(*b.Op1("reshard", {share1}), first);
  ir::Value* share0 = on(*b.Op1("scale", {x0}, {{"scale", 3.0}}), first);
  ir::Value* sum = on(*b.Op1("add", {moved, share0}), first);
  if (backward_reader) on(*b.Op1("scale", {sum}, {{"scale", 1.0}}), first);
  h.program.add_gradient(w, sum);
  h.sum = sum->producer();
  h.move = moved->producer();
  return h;
}

TEST(StageGradientSumsTest, ASumTheBackwardReadsStaysInTheBackward) {
  HandMade read = TwoStageGradient(/*backward_reader=*/true);
  EXPECT_EQ(*SumStageGradientsOncePerStep(read.program), 0);
  EXPECT_EQ(read.sum->role(), ir::OpRole::kBackward);
  EXPECT_EQ(read.move->role(), ir::OpRole::kBackward);
  HandMade unread = TwoStageGradient(/*backward_reader=*/false);
  EXPECT_EQ(*SumStageGradientsOncePerStep(unread.program), 1);
  EXPECT_EQ(unread.sum->role(), ir::OpRole::kOptimizer);
  EXPECT_EQ(unread.move->role(), ir::OpRole::kOptimizer);
}

}  // namespace
}  // namespace pdist::passes
