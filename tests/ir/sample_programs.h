// Programs built with Builder for the IR tests: a tiny matmul+sum, and one that exercises
// multi-result ops, absent optional operands, variadic operands, frozen parameters and states.
#pragma once

#include "gtest/gtest.h"
#include "ir/builder.h"
#include "ir/program.h"
#include "passes/autodiff.h"
#include "passes/optimizer.h"

namespace pdist::testing {

inline ir::TensorType F32(ir::Shape shape) { return {std::move(shape), ir::DataType::kFloat32}; }

// x:f32[8,64] · w:f32[64,64] → sum → loss.
inline ir::Program MatmulSumProgram() {
  ir::Program p;
  ir::Builder b(&p);
  ir::Value* x = b.Data("x", F32({8, 64}));
  ir::Value* w = b.Parameter("w", F32({64, 64}), "normal(0.02)");
  ir::Value* y = b.Op1("matmul", {x, w}).value();
  p.set_loss(b.Op1("sum", {y}).value());
  return p;
}

// matmul, add, layer_norm (3 results, absent bias), split (3 results), concat (variadic), sum;
// a frozen parameter and an optimizer state argument.
inline ir::Program RichProgram() {
  ir::Program p;
  ir::Builder b(&p);
  ir::Value* x = b.Data("x", F32({4, 6}));
  ir::Value* w = b.Parameter("w", F32({6, 6}), "normal(0.02)");
  ir::Value* bias = b.Parameter("bias", F32({6}), "zeros", /*trainable=*/false);
  ir::Value* scale = b.Parameter("ln.scale", F32({6}), "ones");
  b.State("step", {{1}, ir::DataType::kInt64}, "zeros");
  ir::Value* h = b.Op1("matmul", {x, w}, {{"trans_y", true}}).value();
  ir::Value* hb = b.Op1("add", {h, bias}).value();
  std::vector<ir::Value*> ln = b.Create("layer_norm", {hb, scale, nullptr}, {{"epsilon", 1e-6}}).value();
  std::vector<ir::Value*> parts =
      b.Create("split", {ln[0]}, {{"sections", std::vector<int64_t>{2, 3, 1}}, {"axis", int64_t{1}}}).value();
  ir::Value* joined = b.Op1("concat", {parts[2], parts[0], parts[1]}, {{"axis", int64_t{1}}}).value();
  p.set_loss(b.Op1("sum", {joined}).value());
  return p;
}

// RichProgram after autodiff and an adamw optimizer: gradients, updates, grad-role results.
inline ir::Program TrainingProgram() {
  ir::Program p = RichProgram();
  EXPECT_TRUE(passes::AppendBackward(p, p.loss()).ok());
  EXPECT_TRUE(passes::AppendOptimizer(p, passes::OptimizerConfig{}).ok());
  return p;
}

}  // namespace pdist::testing
