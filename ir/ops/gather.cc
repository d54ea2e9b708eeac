// gather: slices of x along one axis picked by integer indices (numpy's take, ONNX's Gather), and
// gather_grad, which adds each picked slice's gradient back where it came from.
//
//   %2 = gather(%0, %1) {axis = 1} : f32[5,2,3,2]        // %0 : f32[5,4,2], %1 : i64[2,3]
//   %3 = gather_grad(%1, %g) {axis = 1, x_shape = [5, 4, 2]} : f32[5,4,2]
//
// out.shape = x.shape[:axis] + index.shape + x.shape[axis+1:]; a negative index counts from the
// end of the axis; one out of range is a run-time error naming it. embedding is the 2-D,
// axis-0 case with vocab-parallel forms (ir/ops/nn.cc); gather serves every other.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ir/builder.h"
#include "ir/op_def.h"
#include "ir/ops/op_families.h"
#include "ir/ops/op_helpers.h"
#include "ir/spmd/rules.h"
#include "ir/status.h"

namespace pdist::ir {
namespace {

using ops::SetSpmd;

absl::Status ExpectIndex(const TensorType& index) {
  if (index.dtype == DataType::kInt32 || index.dtype == DataType::kInt64) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("index must be i32 or i64, got ", index.ToString()));
}

// x.shape[:axis] + index.shape + x.shape[axis+1:].
Shape GatheredShape(const Shape& x, int64_t axis, const Shape& index) {
  Shape out(x.begin(), x.begin() + axis);
  out.insert(out.end(), index.begin(), index.end());
  out.insert(out.end(), x.begin() + axis + 1, x.end());
  return out;
}

absl::StatusOr<std::vector<TensorType>> GatherMeta(const InputTypes& in, const AttributeMap& attrs) {
  PDIST_RETURN_IF_ERROR(ExpectIndex(*in[1]));
  PDIST_ASSIGN_OR_RETURN(int64_t axis, GetInt(attrs, "axis"));
  if (in[0]->rank() == 0) return absl::InvalidArgumentError("x must have rank >= 1");
  PDIST_ASSIGN_OR_RETURN(axis, ops::NormalizeAxis(axis, in[0]->rank()));
  return std::vector<TensorType>{{GatheredShape(in[0]->shape, axis, in[1]->shape), in[0]->dtype}};
}

absl::StatusOr<std::vector<TensorType>> GatherGradMeta(const InputTypes& in, const AttributeMap& attrs) {
  PDIST_RETURN_IF_ERROR(ExpectIndex(*in[0]));
  PDIST_RETURN_IF_ERROR(ops::ExpectFloat(in, 1, "out_grad"));
  PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> x_shape, GetIntList(attrs, "x_shape"));
  PDIST_ASSIGN_OR_RETURN(int64_t axis, GetInt(attrs, "axis"));
  const Shape x(x_shape.begin(), x_shape.end());
  if (x.empty()) return absl::InvalidArgumentError("x_shape must have rank >= 1");
  PDIST_ASSIGN_OR_RETURN(axis, ops::NormalizeAxis(axis, static_cast<int64_t>(x.size())));
  const Shape want = GatheredShape(x, axis, in[0]->shape);
  if (in[1]->shape != want) {
    return absl::InvalidArgumentError(absl::StrCat("out_grad must be ", ShapeToString(want), " (gather's result for x ",
                                                   ShapeToString(x), "), got ", in[1]->ToString()));
  }
  return std::vector<TensorType>{{x, in[1]->dtype}};
}

absl::StatusOr<std::vector<Value*>> GatherGrad(Builder& b, const Operation& op, const std::vector<Value*>& out_grads) {
  if (out_grads.empty() || out_grads[0] == nullptr || !IsFloatingPoint(op.operand(0)->type().dtype)) {
    return std::vector<Value*>{nullptr, nullptr};
  }
  const Shape& x = op.operand(0)->type().shape;
  PDIST_ASSIGN_OR_RETURN(Value * x_grad,
                         b.Op1("gather_grad", {op.operand(1), out_grads[0]},
                               {{"axis", op.attrs().at("axis")}, {"x_shape", std::vector<int64_t>(x.begin(), x.end())}}));
  return std::vector<Value*>{x_grad, nullptr};
}

// Bytes moved: out read and written once, index once.
CostFn MovementCost() {
  return [](const InputTypes& in, const std::vector<TensorType>& out, const AttributeMap&) {
    return OpCost{0, ops::TotalBytes(in, out)};
  };
}

}  // namespace

absl::Status RegisterGatherOps(OpRegistry& registry) {
  OpDef gather;
  gather.name = "gather";
  gather.inputs = {{"x"}, {"index"}};
  gather.outputs = {{"out"}};
  gather.attrs = {{"axis", int64_t{0}}};
  gather.infer_meta = GatherMeta;
  gather.grad = GatherGrad;
  gather.cost = MovementCost();
  SetSpmd(gather, spmd::GatherRule());
  gather.index_operands = {{.operand = 1, .into = 0, .dim_attr = "axis", .from_end = true}};
  PDIST_RETURN_IF_ERROR(registry.Register(std::move(gather)));

  OpDef grad;
  grad.name = "gather_grad";
  grad.inputs = {{"index"}, {"out_grad"}};
  grad.outputs = {{"x_grad"}};
  grad.attrs = {{"axis", int64_t{0}}, {"x_shape", std::vector<int64_t>{}}};
  grad.result_shape_attr = "x_shape";  // partition and micro-batching rewrite it to the local shape
  grad.infer_meta = GatherGradMeta;
  grad.grad_kind = GradKind::kGradientOp;
  grad.cost = [](const InputTypes& in, const std::vector<TensorType>& out, const AttributeMap&) {
    return OpCost{static_cast<double>(in[1]->num_elements()), ops::TotalBytes(in, out)};  // one add per element
  };
  SetSpmd(grad, spmd::GatherGradRule());
  return registry.Register(std::move(grad));
}

}  // namespace pdist::ir
