// matmul and matmul_grad: batched, broadcasting matrix products (Paddle's matmul_v2).
//
//   %2 = matmul(%0, %1) {trans_x = false, trans_y = true} : f32[8,32,256]    // [8,32,64]·[256,64]ᵀ
//   %5, %6 = matmul_grad(%0, %1, %4) {trans_x = false, trans_y = true} : f32[8,32,64], f32[256,64]
#include "ir/ops/matmul.h"

#include "absl/strings/str_cat.h"
#include "ir/op_def.h"
#include "ir/ops/op_families.h"
#include "ir/ops/op_helpers.h"
#include "ir/spmd/rules.h"
#include "ir/status.h"

namespace pdist::ir {
namespace ops {

absl::StatusOr<MatmulDims> InferMatmulDims(const Shape& x, const Shape& y, bool trans_x, bool trans_y) {
  if (x.empty() || y.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("operands must have rank >= 1, got x ", ShapeToString(x), " and y ", ShapeToString(y)));
  }
  MatmulDims d;
  d.trans_x = trans_x && x.size() > 1;
  d.trans_y = trans_y && y.size() > 1;
  // Rows and columns of the stored matrices after promoting 1-D operands.
  const int64_t x_rows = x.size() > 1 ? x[x.size() - 2] : 1;
  const int64_t x_cols = x.back();
  const int64_t y_rows = y.size() > 1 ? y[y.size() - 2] : y.back();
  const int64_t y_cols = y.size() > 1 ? y.back() : 1;
  d.m = d.trans_x ? x_cols : x_rows;
  const int64_t kx = d.trans_x ? x_rows : x_cols;
  const int64_t ky = d.trans_y ? y_cols : y_rows;
  d.n = d.trans_y ? y_rows : y_cols;
  if (kx != ky) {
    return absl::InvalidArgumentError(absl::StrCat("contraction dims differ: x ", ShapeToString(x),
                                                   d.trans_x ? " (trans_x)" : "", " k=", kx, " vs y ", ShapeToString(y),
                                                   d.trans_y ? " (trans_y)" : "", " k=", ky));
  }
  d.k = kx;
  if (x.size() > 2) d.x_batch.assign(x.begin(), x.end() - 2);
  if (y.size() > 2) d.y_batch.assign(y.begin(), y.end() - 2);
  absl::StatusOr<Shape> batch = BroadcastShapes(d.x_batch, d.y_batch);
  if (!batch.ok()) return WithContext(batch.status(), "batch dims");
  d.batch = *batch;
  d.out = d.batch;
  if (x.size() > 1) d.out.push_back(d.m);
  if (y.size() > 1) d.out.push_back(d.n);
  return d;
}

}  // namespace ops

namespace {

absl::StatusOr<ops::MatmulDims> DimsOf(const InputTypes& in, const AttributeMap& attrs) {
  PDIST_RETURN_IF_ERROR(ops::ExpectFloat(in, 0, "x"));
  PDIST_RETURN_IF_ERROR(ops::ExpectFloat(in, 1, "y"));
  if (in[0]->dtype != in[1]->dtype) {
    return absl::InvalidArgumentError(
        absl::StrCat("x and y must have one dtype, got ", in[0]->ToString(), " and ", in[1]->ToString()));
  }
  PDIST_ASSIGN_OR_RETURN(bool trans_x, GetBool(attrs, "trans_x"));
  PDIST_ASSIGN_OR_RETURN(bool trans_y, GetBool(attrs, "trans_y"));
  return ops::InferMatmulDims(in[0]->shape, in[1]->shape, trans_x, trans_y);
}

absl::StatusOr<std::vector<TensorType>> MatmulMeta(const InputTypes& in, const AttributeMap& attrs) {
  PDIST_ASSIGN_OR_RETURN(ops::MatmulDims d, DimsOf(in, attrs));
  return std::vector<TensorType>{{d.out, in[0]->dtype}};
}

// (x, y, out_grad) → x_grad, y_grad: broadcast batch dims are summed back to each operand's shape.
absl::StatusOr<std::vector<TensorType>> MatmulGradMeta(const InputTypes& in, const AttributeMap& attrs) {
  PDIST_ASSIGN_OR_RETURN(ops::MatmulDims d, DimsOf(in, attrs));
  const TensorType out{d.out, in[0]->dtype};
  if (in[2] == nullptr || *in[2] != out) {
    return absl::InvalidArgumentError(absl::StrCat("out_grad must be ", out.ToString(), " (matmul's result), got ",
                                                   in[2] ? in[2]->ToString() : "none"));
  }
  return std::vector<TensorType>{*in[0], *in[1]};
}

absl::StatusOr<std::vector<Value*>> MatmulGrad(Builder& b, const Operation& op, const std::vector<Value*>& out_grads) {
  if (out_grads[0] == nullptr) return std::vector<Value*>(op.num_operands(), nullptr);
  return ops::EmitGradOp(b, op, "matmul_grad", {op.operand(0), op.operand(1), out_grads[0]}, {0, 1});
}

// `gemms` products of 2·m·n·k FLOPs each per batch: 1 for the forward, 2 (dX and dY) for the grad.
CostFn MatmulCost(double gemms) {
  return [gemms](const InputTypes& in, const std::vector<TensorType>& out, const AttributeMap& attrs) {
    OpCost cost{0, ops::TotalBytes(in, out)};
    absl::StatusOr<ops::MatmulDims> d = DimsOf(in, attrs);
    if (d.ok()) {
      cost.flops = gemms * 2.0 * static_cast<double>(NumElements(d->batch)) * static_cast<double>(d->m) *
                   static_cast<double>(d->n) * static_cast<double>(d->k);
    }
    return cost;
  };
}

}  // namespace

absl::Status RegisterMatmulOps(OpRegistry& registry) {
  const std::vector<AttrSpec> attrs = {{"trans_x", false}, {"trans_y", false}};
  const spmd::SpmdRuleFns rule = spmd::MatmulRule();
  const spmd::SpmdRuleFns grad_rule = spmd::MatmulGradRule();
  PDIST_RETURN_IF_ERROR(registry.Register(OpDef{
      .name = "matmul",
      .inputs = {{"x"}, {"y"}},
      .outputs = {{"out"}},
      .attrs = attrs,
      .infer_meta = MatmulMeta,
      .grad = MatmulGrad,
      .cost = MatmulCost(1),
      .infer_spmd = rule.infer,
      .infer_spmd_reverse = rule.reverse,
      .describe_spmd = rule.describe,
      .compute_bound = true,
  }));
  return registry.Register(OpDef{
      .name = "matmul_grad",
      .inputs = {{"x"}, {"y"}, {"out_grad"}},
      .outputs = {{"x_grad"}, {"y_grad"}},
      .attrs = attrs,
      .infer_meta = MatmulGradMeta,
      .grad_kind = GradKind::kGradientOp,
      .grad = nullptr,
      .cost = MatmulCost(2),
      .infer_spmd = grad_rule.infer,
      .infer_spmd_reverse = grad_rule.reverse,
      .describe_spmd = grad_rule.describe,
  });
}

}  // namespace pdist::ir
