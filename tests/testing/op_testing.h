// Test helpers for ops: run one op through builder + executor, and check its gradients against
// central finite differences in float64.
//
//   auto out = RunOp("matmul", {RandomTensor({{4, 3}, DataType::kFloat64}, 1),
//                               RandomTensor({{3, 5}, DataType::kFloat64}, 2)}, {});
//   EXPECT_OK(CheckOpGradients("matmul", {{{{4, 3}, kF64}}, {{{3, 5}, kF64}}}, {}));
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "executor/tensor.h"
#include "ir/attribute.h"
#include "ir/types.h"

namespace pdist::testing {

// A tensor of `type` with values uniform in [lo, hi) from a seeded generator (integers are
// rounded down; bools are value > 0.5).
exec::Tensor RandomTensor(const ir::TensorType& type, uint64_t seed, double lo = -1.0, double hi = 1.0);

// Builds a one-op program whose data inputs are `inputs` (an undefined Tensor = absent
// optional operand), runs it, returns every result.
absl::StatusOr<std::vector<exec::Tensor>> RunOp(const std::string& op_type, const std::vector<exec::Tensor>& inputs,
                                                const ir::AttributeMap& attrs);

struct GradInput {
  exec::Tensor value;         // float64 inputs are differentiated; others are held fixed
  bool differentiable = true;  // false: hold fixed even if float (e.g. a mask)
};

struct GradCheckOptions {
  double step = 1e-6;   // central-difference step
  double rtol = 1e-5;   // |analytic - numeric| <= atol + rtol * |numeric|, element-wise
  double atol = 1e-7;
  uint64_t seed = 7;
  // Results that are not differentiated through (e.g. layer_norm's mean and variance). Empty:
  // every floating-point result enters the loss.
  std::vector<int> loss_results;
};

// Builds `op_type` on `inputs`, a loss sum_k sum(result_k * r_k) with fixed random weights r_k,
// appends backward ops with passes::AppendBackward, and compares the gradient of every
// differentiable float64 input with central differences. The error names the op, the input,
// the worst element and both values.
absl::Status CheckOpGradients(const std::string& op_type, const std::vector<GradInput>& inputs,
                              const ir::AttributeMap& attrs, const GradCheckOptions& options = {});

}  // namespace pdist::testing
