// AppendBackward: gradient accumulation for values used twice, frozen parameters, errors, and
// end-to-end numbers against a hand-derived gradient.
#include "passes/autodiff.h"

#include <gtest/gtest.h>

#include "executor/executor.h"
#include "ir/builder.h"
#include "passes/optimizer.h"
#include "tests/testing/op_testing.h"

namespace pdist::passes {
namespace {

using ir::DataType;

// loss = sum((x·w) * (x·w)) uses x·w twice; d loss / d w = 2·xᵀ(x·w).
TEST(AutodiffTest, AccumulatesGradientsOfValuesUsedTwice) {
  ir::Program p;
  ir::Builder b(&p);
  ir::Value* x = b.Data("x", {{2, 3}, DataType::kFloat64});
  ir::Value* w = b.Parameter("w", {{3, 2}, DataType::kFloat64}, "normal(1.0)");
  ir::Value* y = *b.Op1("matmul", {x, w});
  ir::Value* sq = *b.Op1("multiply", {y, y});
  ir::Value* loss = *b.Op1("sum", {sq});
  p.set_loss(loss);
  ASSERT_TRUE(AppendBackward(p, loss).ok());
  ASSERT_EQ(p.gradients().size(), 1u);
  const ir::Value* gw = p.GradientOf(w);
  ASSERT_NE(gw, nullptr);
  EXPECT_EQ(gw->role(), ir::ValueRole::kGradient);

  exec::ExecutorOptions options;
  options.fetch_ids = {gw->id(), y->id()};
  auto executor = exec::Executor::Create(p, options);
  ASSERT_TRUE(executor.ok()) << executor.status();
  exec::Workspace ws;
  ASSERT_TRUE(exec::InitializeWorkspace(p, 1, ws).ok());
  exec::Tensor xt = exec::TensorFromDoubles({{2, 3}, DataType::kFloat64}, {1, 2, 3, 4, 5, 6});
  auto run = executor->Run({{"x", xt}}, ws);
  ASSERT_TRUE(run.ok()) << run.status();
  const exec::Tensor& yt = run->fetched.at(y->id());
  const exec::Tensor& g = run->fetched.at(gw->id());
  for (int k = 0; k < 3; ++k) {
    for (int j = 0; j < 2; ++j) {
      double expected = 0;
      for (int i = 0; i < 2; ++i) expected += 2 * xt.At(i * 3 + k) * yt.At(i * 2 + j);
      EXPECT_NEAR(g.At(k * 2 + j), expected, 1e-12) << k << "," << j;
    }
  }
}

TEST(AutodiffTest, FrozenParametersGetNoGradient) {
  ir::Program p;
  ir::Builder b(&p);
  ir::Value* x = b.Data("x", {{2, 3}, DataType::kFloat32});
  ir::Value* frozen = b.Parameter("frozen", {{3, 3}, DataType::kFloat32}, "ones", /*trainable=*/false);
  ir::Value* w = b.Parameter("w", {{3, 1}, DataType::kFloat32}, "ones");
  ir::Value* h = *b.Op1("matmul", {x, frozen});
  ir::Value* loss = *b.Op1("sum", {*b.Op1("matmul", {h, w})});
  p.set_loss(loss);
  ASSERT_TRUE(AppendBackward(p, loss).ok());
  EXPECT_EQ(p.GradientOf(frozen), nullptr);
  EXPECT_NE(p.GradientOf(w), nullptr);
}

TEST(AutodiffTest, RejectsNonScalarLossAndSecondRun) {
  ir::Program p;
  ir::Builder b(&p);
  ir::Value* w = b.Parameter("w", {{3}, DataType::kFloat32}, "ones");
  ir::Value* r = *b.Op1("relu", {w});
  absl::Status status = AppendBackward(p, r);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(status.message()).find("scalar"), std::string::npos) << status;

  ir::Value* loss = *b.Op1("sum", {r});
  ASSERT_TRUE(AppendBackward(p, loss).ok());
  EXPECT_EQ(AppendBackward(p, loss).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(OptimizerTest, AdamwCreatesStatesAndUpdates) {
  ir::Program p;
  ir::Builder b(&p);
  ir::Value* w = b.Parameter("w", {{4}, DataType::kFloat32}, "ones");
  ir::Value* loss = *b.Op1("sum", {*b.Op1("multiply", {w, w})});
  p.set_loss(loss);
  ASSERT_TRUE(AppendBackward(p, loss).ok());
  ASSERT_TRUE(AppendOptimizer(p, OptimizerConfig{}).ok());
  ASSERT_NE(p.FindArgument("w.moment1"), nullptr);
  ASSERT_NE(p.FindArgument("w.beta2_pow"), nullptr);
  ASSERT_NE(p.FindArgument(kLearningRateFeed), nullptr);
  EXPECT_EQ(p.updates().size(), 5u);  // param + 4 states

  // One SGD-free AdamW step from w = 1 with lr 0.1: Adam's first step moves each weight by
  // lr·sign(g) (bias-corrected m/√v = ±1), decay shrinks it by (1 − lr·coeff) first.
  auto executor = exec::Executor::Create(p);
  ASSERT_TRUE(executor.ok()) << executor.status();
  exec::Workspace ws;
  ASSERT_TRUE(exec::InitializeWorkspace(p, 1, ws).ok());
  auto run = executor->Run({{kLearningRateFeed, exec::Tensor::Scalar(DataType::kFloat32, 0.1)}}, ws);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_NEAR(run->loss, 4.0, 1e-6);
  const double expected = 1.0 * (1 - 0.1 * 0.01) - 0.1;
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(ws.at("w").At(i), expected, 1e-5);
}

TEST(OptimizerTest, NeedsGradients) {
  ir::Program p;
  EXPECT_EQ(AppendOptimizer(p, OptimizerConfig{}).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ParseOptimizerType("adagrad").status().code(), absl::StatusCode::kInvalidArgument);
}

// Why there are no gradients after autodiff, where there is a reason to say: no parameters at
// all, or none reaching the loss (a cast to an integer cuts the path). Both said "run autodiff first".
TEST(OptimizerTest, NamesWhyNothingIsTrained) {
  for (bool with_parameter : {false, true}) {
    ir::Program p;
    ir::Builder b(&p);
    ir::Value* x = b.Data("x", {{4}, DataType::kFloat32});
    if (with_parameter) {
      ir::Value* w = b.Parameter("w", {{4}, DataType::kFloat32}, "ones");
      auto product = b.Op1("multiply", {x, w});
      ASSERT_TRUE(product.ok()) << product.status();
      auto integral = b.Op1("cast", {*product}, {{"dtype", DataType::kInt64}});
      ASSERT_TRUE(integral.ok()) << integral.status();
      auto back = b.Op1("cast", {*integral}, {{"dtype", DataType::kFloat32}});
      ASSERT_TRUE(back.ok()) << back.status();
      x = *back;
    }
    auto loss = b.Op1("mean", {x});
    ASSERT_TRUE(loss.ok()) << loss.status();
    p.set_loss(*loss);
    ASSERT_TRUE(AppendBackward(p, *loss).ok());
    const absl::Status s = AppendOptimizer(p, OptimizerConfig{});
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(s.message().find(with_parameter ? "none of the program's 1 parameters reaches the loss"
                                              : "the program has no parameters"),
              std::string::npos)
        << s;
  }
}

}  // namespace
}  // namespace pdist::passes
