// Broadcasting ops: expand (x broadcast to a shape) and where (a choice between two tensors by a
// bool condition, all three broadcast together), with numpy's right-aligned broadcasting.
//
//   %1 = expand(%0) {shape = [4, 3, 8]} : f32[4,3,8]      // %0 : f32[1,8]
//   %3 = where(%c, %x, %y) : f32[8,8]                      // %c : bool[8,8], %x : f32[8,8], %y : f32[]
//
// Their gradients are built from other ops — no gradient op of their own: expand's is out_grad
// summed back to x's shape (sum over the broadcast dims, then reshape); where's are out_grad
// where the condition chose that operand and 0 elsewhere (where with a zero `full`), each summed
// back to its operand's shape. The condition has none.
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

// `g` (a broadcast result) summed back to `shape`, the shape of an operand it was broadcast from.
absl::StatusOr<Value*> SumToShape(Builder& b, Value* g, const Shape& shape) {
  const Shape& from = g->type().shape;
  const size_t lead = from.size() - shape.size();
  std::vector<int64_t> axes;
  for (size_t d = 0; d < from.size(); ++d) {
    if (d < lead || (shape[d - lead] == 1 && from[d] != 1)) axes.push_back(static_cast<int64_t>(d));
  }
  Value* summed = g;
  if (!axes.empty()) {
    PDIST_ASSIGN_OR_RETURN(summed, b.Op1("sum", {g}, {{"axis", axes}, {"keep_dim", false}}));
  }
  if (summed->type().shape == shape) return summed;
  return b.Op1("reshape", {summed}, {{"shape", std::vector<int64_t>(shape.begin(), shape.end())}});
}

absl::StatusOr<std::vector<TensorType>> ExpandMeta(const InputTypes& in, const AttributeMap& attrs) {
  PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> shape, GetIntList(attrs, "shape"));
  const Shape target(shape.begin(), shape.end());
  absl::StatusOr<Shape> broadcast = ops::BroadcastShapes(in[0]->shape, target);
  if (!broadcast.ok() || *broadcast != target) {
    return absl::InvalidArgumentError(absl::StrCat("x ", in[0]->ToString(), " does not broadcast to shape ",
                                                   ShapeToString(target), " (numpy rules: right-aligned, a dim of x "
                                                   "must be 1 or equal)"));
  }
  return std::vector<TensorType>{{target, in[0]->dtype}};
}

absl::StatusOr<std::vector<Value*>> ExpandGrad(Builder& b, const Operation& op, const std::vector<Value*>& out_grads) {
  if (out_grads.empty() || out_grads[0] == nullptr || !IsFloatingPoint(op.operand(0)->type().dtype)) {
    return std::vector<Value*>{nullptr};
  }
  PDIST_ASSIGN_OR_RETURN(Value * x_grad, SumToShape(b, out_grads[0], op.operand(0)->type().shape));
  return std::vector<Value*>{x_grad};
}

absl::StatusOr<std::vector<TensorType>> WhereMeta(const InputTypes& in, const AttributeMap&) {
  if (in[0]->dtype != DataType::kBool) {
    return absl::InvalidArgumentError(absl::StrCat("condition must be bool, got ", in[0]->ToString()));
  }
  if (in[1]->dtype != in[2]->dtype) {
    return absl::InvalidArgumentError(absl::StrCat("x and y must have one dtype, got ", in[1]->ToString(), " and ",
                                                   in[2]->ToString()));
  }
  PDIST_ASSIGN_OR_RETURN(Shape xy, ops::BroadcastShapes(in[1]->shape, in[2]->shape));
  PDIST_ASSIGN_OR_RETURN(Shape out, ops::BroadcastShapes(in[0]->shape, xy));
  return std::vector<TensorType>{{out, in[1]->dtype}};
}

absl::StatusOr<std::vector<Value*>> WhereGrad(Builder& b, const Operation& op, const std::vector<Value*>& out_grads) {
  std::vector<Value*> grads(3, nullptr);
  if (out_grads.empty() || out_grads[0] == nullptr || !IsFloatingPoint(op.operand(1)->type().dtype)) return grads;
  Value* g = out_grads[0];
  PDIST_ASSIGN_OR_RETURN(Value * zeros, b.Op1("full", {}, {{"shape", g->type().shape}, {"value", 0.0},
                                                           {"dtype", g->type().dtype}}));
  PDIST_ASSIGN_OR_RETURN(Value * to_x, b.Op1("where", {op.operand(0), g, zeros}));
  PDIST_ASSIGN_OR_RETURN(Value * to_y, b.Op1("where", {op.operand(0), zeros, g}));
  PDIST_ASSIGN_OR_RETURN(grads[1], SumToShape(b, to_x, op.operand(1)->type().shape));
  PDIST_ASSIGN_OR_RETURN(grads[2], SumToShape(b, to_y, op.operand(2)->type().shape));
  return grads;
}

}  // namespace

absl::Status RegisterBroadcastOps(OpRegistry& registry) {
  OpDef expand;
  expand.name = "expand";
  expand.inputs = {{"x"}};
  expand.outputs = {{"out"}};
  expand.attrs = {{"shape", std::vector<int64_t>{}}};
  expand.result_shape_attr = "shape";
  expand.infer_meta = ExpandMeta;
  expand.grad = ExpandGrad;
  expand.cost = [](const InputTypes& in, const std::vector<TensorType>& out, const AttributeMap&) {
    return OpCost{0, ops::TotalBytes(in, out)};
  };
  SetSpmd(expand, spmd::ExpandRule());
  PDIST_RETURN_IF_ERROR(registry.Register(std::move(expand)));

  OpDef where;
  where.name = "where";
  where.inputs = {{"condition"}, {"x"}, {"y"}};
  where.outputs = {{"out"}};
  where.infer_meta = WhereMeta;
  where.grad = WhereGrad;
  where.cost = [](const InputTypes& in, const std::vector<TensorType>& out, const AttributeMap&) {
    return ops::ElementwiseCost(in, out, 1);
  };
  SetSpmd(where, spmd::WhereRule());
  return registry.Register(std::move(where));
}

}  // namespace pdist::ir
