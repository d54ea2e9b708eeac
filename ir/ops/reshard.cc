// reshard: the same tensor, redistributed. The source is the operand's DistAttr, the target the
// result's; the op has no attributes of its own.
//
//   %5 = reshard(%4) : f32[8,64] dist {mesh: [2] [mp], dims_mapping: [-1,-1]}
//        // %4 : f32[8,64] dist {mesh: [2] [mp], dims_mapping: [-1,-1], partial: {0: sum}}
//        // = an all-reduce over mp once partition lowers it (passes/partition.h)
//
// In the global program a reshard changes no value, only where the pieces live, so its shape
// inference, its kernel (executor/cpu/reshard_kernels.cc) and its SPMD rule are identities. The
// completion pass inserts reshards where a consumer needs another DistAttr than its producer
// gives; a user may also write one to force a redistribution.
#include <vector>

#include "ir/builder.h"
#include "ir/op_def.h"
#include "ir/ops/op_families.h"
#include "ir/status.h"

namespace pdist::ir {
namespace {

// The gradient is a reshard of out_grad back to where x lived. A Partial x gets a gradient
// without Partial: the backward of the reduction that P→R performs is a broadcast, i.e. every
// rank receives the whole out_grad.
absl::StatusOr<std::vector<Value*>> ReshardGrad(Builder& b, const Operation& op, const std::vector<Value*>& out_grads) {
  if (out_grads[0] == nullptr) return std::vector<Value*>{nullptr};
  PDIST_ASSIGN_OR_RETURN(Value * dx, b.Op1("reshard", {out_grads[0]}));
  if (const std::optional<DistAttr>& source = op.operand(0)->dist_attr()) {
    DistAttr target = *source;
    target.partial.clear();
    dx->set_dist_attr(std::move(target));
  }
  return std::vector<Value*>{dx};
}

// Forward: the operand stays as it is and the result takes it over, unless the result already
// has a DistAttr (the reshard's target), which the completion pass keeps. Reverse: both sides
// stay as they are — a reshard is where two distributions meet, so nothing propagates across it
// backwards.
absl::StatusOr<SpmdResult> ReshardSpmd(const std::vector<TensorDistSpec>& inputs, const SpmdContext&) {
  return SpmdResult{.inputs = inputs, .outputs = inputs};
}

absl::StatusOr<SpmdResult> ReshardSpmdReverse(const std::vector<TensorDistSpec>& inputs,
                                              const std::vector<TensorDistSpec>& outputs, const SpmdContext&) {
  return SpmdResult{.inputs = inputs, .outputs = outputs};
}

}  // namespace

absl::Status RegisterReshardOps(OpRegistry& registry) {
  return registry.Register(OpDef{
      .name = "reshard",
      .inputs = {{"x"}},
      .outputs = {{"out"}},
      .attrs = {},
      .infer_meta = [](const InputTypes& in, const AttributeMap&) -> absl::StatusOr<std::vector<TensorType>> {
        return std::vector<TensorType>{*in[0]};
      },
      .grad = ReshardGrad,
      // What a global reshard costs on one rank, which runs it as the identity: the tensor read
      // once and written once. Distributed, it is priced after partition has lowered it to the
      // collectives of its plan (passes/reshard_plan.h, planner/comm_cost.h).
      .cost = [](const InputTypes& in, const std::vector<TensorType>&,
                 const AttributeMap&) { return OpCost{0, 2.0 * static_cast<double>(in[0]->num_bytes())}; },
      .infer_spmd = ReshardSpmd,
      .infer_spmd_reverse = ReshardSpmdReverse,
      .describe_spmd = [](const std::vector<const TensorType*>&, const AttributeMap&) {
        return std::string("out = x (identity; source → target set by the values' DistAttrs)");
      },
  });
}

}  // namespace pdist::ir
