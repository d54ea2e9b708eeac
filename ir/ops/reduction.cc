// Reductions sum, mean, max, min and their gradient ops; full (a constant tensor).
//
//   %1 = sum(%0) {axis = [-1], keep_dim = false} : f32[8,32]          // %0 : f32[8,32,64]
//   %2 = max(%0) {axis = [], keep_dim = false} : f32[]                // [] = every axis
//   %3 = full() {dtype = f32, shape = [8,32], value = 0.0} : f32[8,32]
//
// max_grad and min_grad split the gradient evenly among the elements that tie for the extreme
// (torch.amax's subgradient): it does not depend on the order in which elements are visited.
#include "ir/ops/reduction.h"

#include "absl/strings/str_cat.h"
#include "ir/op_def.h"
#include "ir/ops/op_families.h"
#include "ir/ops/op_helpers.h"
#include "ir/spmd/rules.h"
#include "ir/status.h"

namespace pdist::ir {
namespace ops {

absl::StatusOr<std::vector<bool>> ReducedAxes(int64_t rank, const std::vector<int64_t>& axis) {
  std::vector<bool> reduced(static_cast<size_t>(rank), axis.empty());
  for (int64_t a : axis) {
    PDIST_ASSIGN_OR_RETURN(int64_t normalized, NormalizeAxis(a, rank));
    if (rank == 0) continue;  // axis 0 or -1 of a scalar: nothing to reduce
    if (reduced[normalized]) return absl::InvalidArgumentError(absl::StrCat("axis ", a, " is named twice"));
    reduced[normalized] = true;
  }
  return reduced;
}

Shape ReducedShape(const Shape& x, const std::vector<bool>& reduced, bool keep_dim) {
  Shape out;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!reduced[i])
      out.push_back(x[i]);
    else if (keep_dim)
      out.push_back(1);
  }
  return out;
}

}  // namespace ops

namespace {

// The type of reduce(x) under `attrs` (axis, keep_dim).
absl::StatusOr<TensorType> ReducedType(const TensorType& x, const AttributeMap& attrs) {
  PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> axis, GetIntList(attrs, "axis"));
  PDIST_ASSIGN_OR_RETURN(bool keep_dim, GetBool(attrs, "keep_dim"));
  PDIST_ASSIGN_OR_RETURN(std::vector<bool> reduced, ops::ReducedAxes(x.rank(), axis));
  return TensorType{ops::ReducedShape(x.shape, reduced, keep_dim), x.dtype};
}

absl::StatusOr<std::vector<TensorType>> ReduceMeta(const InputTypes& in, const AttributeMap& attrs) {
  PDIST_RETURN_IF_ERROR(ops::ExpectFloat(in, 0, "x"));
  PDIST_ASSIGN_OR_RETURN(TensorType out, ReducedType(*in[0], attrs));
  return std::vector<TensorType>{out};
}

// (x, [out,] out_grad) → x_grad: every operand after x must have the reduced type.
absl::StatusOr<std::vector<TensorType>> ReduceGradMeta(const InputTypes& in, const AttributeMap& attrs) {
  PDIST_RETURN_IF_ERROR(ops::ExpectFloat(in, 0, "x"));
  PDIST_ASSIGN_OR_RETURN(TensorType out, ReducedType(*in[0], attrs));
  for (size_t i = 1; i < in.size(); ++i) {
    if (in[i] == nullptr || *in[i] != out) {
      return absl::InvalidArgumentError(absl::StrCat("operand ", i, " must be ", out.ToString(),
                                                     " (the reduced type), got ", in[i] ? in[i]->ToString() : "none"));
    }
  }
  return std::vector<TensorType>{*in[0]};
}

// sum_grad / mean_grad take (x, out_grad), x for its type alone (OpDef::type_only_operands: the
// forward need not keep it); max_grad / min_grad read x and the forward result.
GradFn ReduceGrad(const std::string& grad_type, bool needs_out) {
  return [grad_type, needs_out](Builder& b, const Operation& op,
                                const std::vector<Value*>& out_grads) -> absl::StatusOr<std::vector<Value*>> {
    if (out_grads[0] == nullptr) return std::vector<Value*>(op.num_operands(), nullptr);
    std::vector<Value*> operands = {op.operand(0)};
    if (needs_out) operands.push_back(op.result(0));
    operands.push_back(out_grads[0]);
    return ops::EmitGradOp(b, op, grad_type, operands, {0});
  };
}

// `flops_per_x_element` per element of x; every operand and result moves once.
CostFn PerInputElementCost(double flops_per_x_element) {
  return [flops_per_x_element](const InputTypes& in, const std::vector<TensorType>& out, const AttributeMap&) {
    return OpCost{flops_per_x_element * static_cast<double>(in[0]->num_elements()), ops::TotalBytes(in, out)};
  };
}

absl::Status RegisterReduction(OpRegistry& registry, const std::string& name, spmd::ReductionKind kind) {
  // Paddle's sum also takes an output dtype; pdist's reductions keep x's dtype.
  const std::vector<AttrSpec> attrs = {{"axis", std::vector<int64_t>{}}, {"keep_dim", false}};
  const std::string grad_name = name + "_grad";
  const bool grad_needs_out = kind == spmd::ReductionKind::kMax || kind == spmd::ReductionKind::kMin;
  const spmd::SpmdRuleFns rule = spmd::ReductionRule(name, kind);
  const spmd::SpmdRuleFns grad_rule = spmd::ReductionGradRule(grad_name, kind);
  PDIST_RETURN_IF_ERROR(registry.Register(OpDef{
      .name = name,
      .inputs = {{"x"}},
      .outputs = {{"out"}},
      .attrs = attrs,
      .infer_meta = ReduceMeta,
      .grad = ReduceGrad(grad_name, grad_needs_out),
      .cost = PerInputElementCost(1),
      .infer_spmd = rule.infer,
      .infer_spmd_reverse = rule.reverse,
      .describe_spmd = rule.describe,
  }));
  std::vector<OperandSpec> grad_inputs = {{"x"}};
  if (grad_needs_out) grad_inputs.push_back({"out"});
  grad_inputs.push_back({"out_grad"});
  return registry.Register(OpDef{
      .name = grad_name,
      .inputs = grad_inputs,
      .outputs = {{"x_grad"}},
      .attrs = attrs,
      .infer_meta = ReduceGradMeta,
      .grad_kind = GradKind::kGradientOp,
      .grad = nullptr,
      // A broadcast (and scale) per element; max/min also compare and count ties.
      .cost = PerInputElementCost(grad_needs_out ? 3 : 1),
      .infer_spmd = grad_rule.infer,
      .infer_spmd_reverse = grad_rule.reverse,
      .describe_spmd = grad_rule.describe,
      .type_only_operands = grad_needs_out ? std::vector<size_t>{} : std::vector<size_t>{0},
  });
}

absl::StatusOr<std::vector<TensorType>> FullMeta(const InputTypes& in, const AttributeMap& attrs) {
  PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> shape, GetIntList(attrs, "shape"));
  PDIST_ASSIGN_OR_RETURN(DataType dtype, GetDataType(attrs, "dtype"));
  for (int64_t d : shape) {
    if (d < 0) return absl::InvalidArgumentError(absl::StrCat("shape ", ShapeToString(shape), " has a negative dim"));
  }
  return std::vector<TensorType>{{shape, dtype}};
}

}  // namespace

absl::Status RegisterReductionOps(OpRegistry& registry) {
  PDIST_RETURN_IF_ERROR(RegisterReduction(registry, "sum", spmd::ReductionKind::kSum));
  PDIST_RETURN_IF_ERROR(RegisterReduction(registry, "mean", spmd::ReductionKind::kMean));
  PDIST_RETURN_IF_ERROR(RegisterReduction(registry, "max", spmd::ReductionKind::kMax));
  PDIST_RETURN_IF_ERROR(RegisterReduction(registry, "min", spmd::ReductionKind::kMin));
  const spmd::SpmdRuleFns full_rule = spmd::FullRule();
  return registry.Register(OpDef{
      .name = "full",
      .inputs = {},
      .outputs = {{"out"}},
      .attrs = {{"shape", std::vector<int64_t>{}}, {"value", 0.0}, {"dtype", DataType::kFloat32}},
      .infer_meta = FullMeta,
      .grad_kind = GradKind::kNotDifferentiable,
      .grad = nullptr,
      .cost =
          [](const InputTypes& in, const std::vector<TensorType>& out, const AttributeMap&) {
            return OpCost{0, ops::TotalBytes(in, out)};
          },
      .infer_spmd = full_rule.infer,
      .infer_spmd_reverse = full_rule.reverse,
      .describe_spmd = full_rule.describe,
      .result_shape_attr = "shape",
  });
}

}  // namespace pdist::ir
