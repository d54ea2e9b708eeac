// Helpers shared by the op families: broadcasting, axis normalisation, costs, gradient ops.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/builder.h"
#include "ir/op_def.h"
#include "ir/spmd/einsum_rule.h"

namespace pdist::ir::ops {

// Fills the three SPMD slots of `op` (forward, reverse, describe) from `rule`.
inline void SetSpmd(OpDef& op, const spmd::SpmdRuleFns& rule) {
  op.infer_spmd = rule.infer;
  op.infer_spmd_reverse = rule.reverse;
  op.describe_spmd = rule.describe;
}

// numpy broadcasting of two shapes; error names both shapes.
absl::StatusOr<Shape> BroadcastShapes(const Shape& a, const Shape& b);

// Maps a possibly negative axis into [0, rank); error names the axis and rank.
absl::StatusOr<int64_t> NormalizeAxis(int64_t axis, int64_t rank);

// Checks that the input at `index` is present and floating point / has `rank`.
absl::Status ExpectFloat(const InputTypes& in, size_t index, const std::string& what);
absl::Status ExpectRank(const InputTypes& in, size_t index, int64_t rank, const std::string& what);
absl::Status ExpectSameType(const InputTypes& in, size_t a, size_t b);

// Cost of an op touching every input and output once with `flops_per_element` FLOPs per output
// element.
OpCost ElementwiseCost(const InputTypes& in, const std::vector<TensorType>& out, double flops_per_element);
// Bytes of all present inputs and all outputs.
double TotalBytes(const InputTypes& in, const std::vector<TensorType>& out);

// Emits `grad_type(operands)` with `attrs` (the forward op's attrs by default) and returns a
// vector of size op.num_operands() where entry grad_of[i] is result i of the grad op and the
// rest are nullptr.
absl::StatusOr<std::vector<Value*>> EmitGradOp(Builder& b, const Operation& op, const std::string& grad_type,
                                               const std::vector<Value*>& operands, const std::vector<int>& grad_of);
absl::StatusOr<std::vector<Value*>> EmitGradOp(Builder& b, const Operation& op, const std::string& grad_type,
                                               const std::vector<Value*>& operands, const std::vector<int>& grad_of,
                                               const AttributeMap& attrs);

// `grad` if present, else a zero tensor of `like`'s type built with `full`.
absl::StatusOr<Value*> OrZeros(Builder& b, Value* grad, const Value* like);

// Makes `def` an op of partitioned (per-rank) programs only: no gradient (partition runs after
// autodiff) and SPMD rules that refuse to run (completion runs before partition), described
// by `description`.
void MarkLocalOnly(OpDef& def, const std::string& description);

}  // namespace pdist::ir::ops
