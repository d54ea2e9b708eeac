// A rank's runner updates its state in place (executor/memory_planner.h): a step that fails
// after some updates leaves the runner refusing every use of that state, by name, until a
// whole new state is loaded.
#include "engine/rank_runner.h"

#include <gtest/gtest.h>

#include "ir/builder.h"

namespace pdist::engine {
namespace {

using ir::DataType;

// sgd on w1, then a collective with no communicator (it fails when it runs), then sgd on w2.
ir::Program UpdateThenFail() {
  ir::Program p;
  ir::Builder b(&p);
  const ir::TensorType type{{16}, DataType::kFloat32}, scalar{{}, DataType::kFloat32};
  ir::Value* w1 = b.Parameter("w1", type, "ones");
  ir::Value* w2 = b.Parameter("w2", type, "ones");
  ir::Value* g = b.Data("g", type);
  ir::Value* lr = b.Data("lr", scalar);
  b.set_op_role(ir::OpRole::kOptimizer);
  ir::Value* n1 = *b.Op1("sgd", {w1, lr, g});
  EXPECT_TRUE(b.Op1("c_allreduce", {n1}, {{"ranks", std::vector<int64_t>{0, 1}}}).ok());
  ir::Value* n2 = *b.Op1("sgd", {w2, lr, g});
  p.add_update(w1, n1);
  p.add_update(w2, n2);
  return p;
}

TEST(RankRunnerTest, AStepThatFailsAfterUpdatingInPlaceLeavesTheStateRefusedUntilALoad) {
  const ir::Program program = UpdateThenFail();
  passes::ReshardPlanCache plans;
  auto runner = RankRunner::Create(program, program, /*rank=*/-1, plans, RunnerOptions{});
  ASSERT_TRUE(runner.ok()) << runner.status();
  ASSERT_TRUE((*runner)->Initialize(1).ok());
  auto fresh = (*runner)->LocalStateOnHost();
  ASSERT_TRUE(fresh.ok()) << fresh.status();

  const exec::Feeds feeds{{"g", exec::Tensor::Zeros({{16}, DataType::kFloat32})},
                          {"lr", exec::Tensor::Zeros({{}, DataType::kFloat32})}};
  auto failed = (*runner)->Train(feeds);
  ASSERT_FALSE(failed.ok());
  auto again = (*runner)->Train(feeds);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(again.status().message().find("updated 1 of 2 parameters and optimizer states in place"), std::string::npos)
      << again.status();
  EXPECT_NE(again.status().message().find("load a checkpoint"), std::string::npos);
  EXPECT_FALSE((*runner)->LocalStateOnHost().ok());  // a half-updated state is not saved
  EXPECT_FALSE((*runner)->Eval(feeds).ok());

  ASSERT_TRUE((*runner)->CheckLocalState(*fresh).ok());
  ASSERT_TRUE((*runner)->AdoptState(*fresh).ok());
  EXPECT_TRUE((*runner)->LocalStateOnHost().ok());
}

}  // namespace
}  // namespace pdist::engine
