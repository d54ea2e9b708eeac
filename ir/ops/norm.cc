// Normalisation ops: softmax, log_softmax, layer_norm, rms_norm and their gradient ops.
//
//   %1 = softmax(%0) {axis = -1} : f32[8,32,64]
//   %2, %3, %4 = layer_norm(%0, %w, %b) {begin_norm_axis = 2, epsilon = 1.0e-05}
//        : f32[8,32,64], f32[8,32], f32[8,32]    (mean and variance: x.shape[:begin_norm_axis])
//   %5, %6 = rms_norm(%0, %w) {begin_norm_axis = -1, epsilon = 1.0e-06} : f32[8,32,64], f32[8,32]
//
// A bf16/f16 norm computes in f32 (ir::ComputeDtype), so its statistics are f32 and its scale
// and bias may be f32 — the amp pass's o2 keeps them so, as Apex's mixed fused LayerNorm and
// PyTorch's native_layer_norm (f32 mean and rstd for half inputs) do:
//   %2, %3, %4 = layer_norm(%0, %w, %b) : bf16[8,32,64], f32[8,32], f32[8,32]   (%w, %b : f32[64])
#include <cmath>

#include "absl/strings/str_cat.h"
#include "ir/op_def.h"
#include "ir/ops/op_families.h"
#include "ir/ops/op_helpers.h"
#include "ir/spmd/rules_nn.h"
#include "ir/status.h"

namespace pdist::ir {
namespace {

using ops::EmitGradOp;

// The result type of an absent optional tensor (no scale → no scale_grad): an empty f[0].
TensorType EmptyOf(DataType dtype) { return {{0}, dtype}; }

// layer_norm and rms_norm view x as [rows, cols]: rows = prod(x.shape[:axis]) are normalised
// independently over cols = prod(x.shape[axis:]); scale/bias hold `cols` elements (usually
// shape [cols]). The statistics are shaped x.shape[:axis] — the same values, in the same order,
// as Paddle's flattened [rows] — so that each leading axis keeps its own sharding (Paddle's SPMD
// rule treats them so): a norm runs on a sequence shard under sequence parallelism.
struct NormSplit {
  int64_t rows = 1;
  int64_t cols = 1;
  Shape leading;  // x.shape[:axis]: the statistics' shape
};

absl::StatusOr<NormSplit> SplitAtNormAxis(const TensorType& x, const AttributeMap& attrs) {
  PDIST_ASSIGN_OR_RETURN(int64_t begin, GetInt(attrs, "begin_norm_axis"));
  if (x.rank() == 0) return absl::InvalidArgumentError("x must have rank >= 1");
  if (begin < -x.rank() || begin >= x.rank()) {
    return absl::InvalidArgumentError(
        absl::StrCat("begin_norm_axis ", begin, " out of range for x of rank ", x.rank()));
  }
  if (begin < 0) begin += x.rank();
  // Both norms add epsilon under a square root: a negative one makes a constant row's statistics
  // nan, which surfaced as a loss of nan at the first step.
  PDIST_ASSIGN_OR_RETURN(double epsilon, GetDouble(attrs, "epsilon"));
  if (!(std::isfinite(epsilon) && epsilon >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat("epsilon ", epsilon, " must be >= 0 and finite"));
  }
  NormSplit split;
  for (int64_t i = 0; i < x.rank(); ++i) (i < begin ? split.rows : split.cols) *= x.shape[static_cast<size_t>(i)];
  split.leading.assign(x.shape.begin(), x.shape.begin() + begin);
  return split;
}

// An optional per-column parameter (scale, bias) holds `cols` values of x's dtype or, for a
// bf16/f16 x, of f32 (the type the norm computes in).
absl::Status CheckColumnParam(const InputTypes& in, size_t index, const char* what, const TensorType& x, int64_t cols) {
  if (index >= in.size() || in[index] == nullptr) return absl::OkStatus();
  const TensorType& t = *in[index];
  const bool dtype_ok = t.dtype == x.dtype || t.dtype == ComputeDtype(x.dtype);
  if (!dtype_ok || t.num_elements() != cols) {
    const std::string dtypes = x.dtype == ComputeDtype(x.dtype)
                                   ? std::string(DataTypeName(x.dtype))
                                   : absl::StrCat(DataTypeName(x.dtype), " or ", DataTypeName(ComputeDtype(x.dtype)));
    return absl::InvalidArgumentError(absl::StrCat(what, " must be ", dtypes, " with ", cols,
                                                   " elements (the normalised size) for x ", x.ToString(), ", got ",
                                                   t.ToString()));
  }
  return absl::OkStatus();
}

// The gradient of an optional parameter: its own type, or an empty placeholder when absent.
TensorType GradOfParam(const TensorType* param, DataType x_dtype) {
  return param != nullptr ? *param : EmptyOf(x_dtype);
}

// --- softmax / log_softmax -----------------------------------------------------------------

absl::StatusOr<std::vector<TensorType>> SoftmaxMeta(const InputTypes& in, const AttributeMap& attrs) {
  PDIST_RETURN_IF_ERROR(ops::ExpectFloat(in, 0, "x"));
  PDIST_ASSIGN_OR_RETURN(int64_t axis, GetInt(attrs, "axis"));
  if (in[0]->rank() > 0) PDIST_RETURN_IF_ERROR(ops::NormalizeAxis(axis, in[0]->rank()).status());
  return std::vector<TensorType>{*in[0]};
}

// (out, out_grad) → x_grad.
absl::StatusOr<std::vector<TensorType>> SoftmaxGradMeta(const InputTypes& in, const AttributeMap& attrs) {
  PDIST_RETURN_IF_ERROR(SoftmaxMeta(in, attrs).status());
  PDIST_RETURN_IF_ERROR(ops::ExpectSameType(in, 0, 1));
  return std::vector<TensorType>{*in[0]};
}

// Both softmax flavours differentiate through their output only: grad(out, out_grad).
GradFn SoftmaxGrad(const std::string& grad_type) {
  return [grad_type](Builder& b, const Operation& op,
                     const std::vector<Value*>& out_grads) -> absl::StatusOr<std::vector<Value*>> {
    if (out_grads[0] == nullptr) return std::vector<Value*>(op.num_operands(), nullptr);
    return EmitGradOp(b, op, grad_type, {op.result(0), out_grads[0]}, {0});
  };
}

absl::Status RegisterSoftmaxPair(OpRegistry& registry, const std::string& name) {
  const std::string grad_name = name + "_grad";
  const spmd::SpmdRuleFns rule = spmd::SoftmaxRule(name);
  const spmd::SpmdRuleFns grad_rule = spmd::SoftmaxGradRule(grad_name);
  // exp, max, subtract, sum and divide (or log) per element.
  PDIST_RETURN_IF_ERROR(registry.Register(OpDef{
      .name = name,
      .inputs = {{"x"}},
      .outputs = {{"out"}},
      .attrs = {{"axis", int64_t{-1}}},
      .infer_meta = SoftmaxMeta,
      .grad = SoftmaxGrad(grad_name),
      .cost = [](const InputTypes& in, const std::vector<TensorType>& out,
                 const AttributeMap&) { return ops::ElementwiseCost(in, out, 5); },
      .infer_spmd = rule.infer,
      .infer_spmd_reverse = rule.reverse,
      .describe_spmd = rule.describe,
  }));
  return registry.Register(OpDef{
      .name = grad_name,
      .inputs = {{"out"}, {"out_grad"}},
      .outputs = {{"x_grad"}},
      .attrs = {{"axis", int64_t{-1}}},
      .infer_meta = SoftmaxGradMeta,
      .grad_kind = GradKind::kGradientOp,
      .grad = nullptr,
      .cost = [](const InputTypes& in, const std::vector<TensorType>& out,
                 const AttributeMap&) { return ops::ElementwiseCost(in, out, 4); },
      .infer_spmd = grad_rule.infer,
      .infer_spmd_reverse = grad_rule.reverse,
      .describe_spmd = grad_rule.describe,
  });
}

// --- layer_norm --------------------------------------------------------------------------

// (x, scale?, bias?) → out, mean, variance (both x.shape[:begin_norm_axis]).
absl::StatusOr<std::vector<TensorType>> LayerNormMeta(const InputTypes& in, const AttributeMap& attrs) {
  PDIST_RETURN_IF_ERROR(ops::ExpectFloat(in, 0, "x"));
  const TensorType& x = *in[0];
  PDIST_ASSIGN_OR_RETURN(NormSplit split, SplitAtNormAxis(x, attrs));
  PDIST_RETURN_IF_ERROR(CheckColumnParam(in, 1, "scale", x, split.cols));
  PDIST_RETURN_IF_ERROR(CheckColumnParam(in, 2, "bias", x, split.cols));
  if (in.size() > 2 && in[1] != nullptr && in[2] != nullptr && in[1]->dtype != in[2]->dtype) {
    return absl::InvalidArgumentError(absl::StrCat("scale and bias must have one dtype, got ", in[1]->ToString(),
                                                   " and ", in[2]->ToString()));
  }
  const TensorType stats{split.leading, ComputeDtype(x.dtype)};
  return std::vector<TensorType>{x, stats, stats};
}

// (x, scale?, bias?, mean, variance, out_grad) → x_grad, scale_grad, bias_grad; the grad of an
// absent scale or bias is an empty f[0].
absl::StatusOr<std::vector<TensorType>> LayerNormGradMeta(const InputTypes& in, const AttributeMap& attrs) {
  PDIST_ASSIGN_OR_RETURN(std::vector<TensorType> fwd, LayerNormMeta({in[0], in[1], in[2]}, attrs));
  for (size_t i : {3, 4}) {
    if (*in[i] != fwd[1]) {
      return absl::InvalidArgumentError(
          absl::StrCat(i == 3 ? "mean" : "variance", " must be ", fwd[1].ToString(), ", got ", in[i]->ToString()));
    }
  }
  PDIST_RETURN_IF_ERROR(ops::ExpectSameType(in, 0, 5));
  const DataType dtype = in[0]->dtype;
  return std::vector<TensorType>{*in[0], GradOfParam(in[1], dtype), GradOfParam(in[2], dtype)};
}

absl::StatusOr<std::vector<Value*>> LayerNormGrad(Builder& b, const Operation& op,
                                                  const std::vector<Value*>& out_grads) {
  // mean and variance are auxiliary results: only out's gradient flows back.
  if (out_grads[0] == nullptr) return std::vector<Value*>(op.num_operands(), nullptr);
  // layer_norm(x) may be built without its trailing optional operands.
  auto operand = [&](size_t i) { return i < op.num_operands() ? op.operand(i) : nullptr; };
  std::vector<Value*> operands = {operand(0), operand(1), operand(2), op.result(1), op.result(2), out_grads[0]};
  PDIST_ASSIGN_OR_RETURN(std::vector<Value*> results, b.Create("layer_norm_grad", operands, op.attrs()));
  // The grad of an absent scale or bias is an empty placeholder: no gradient flows there.
  std::vector<Value*> grads(op.num_operands(), nullptr);
  for (size_t i = 0; i < grads.size(); ++i) {
    if (operand(i) != nullptr) grads[i] = results[i];
  }
  return grads;
}

// --- rms_norm ----------------------------------------------------------------------------

// (x, scale) → out, invvar (x.shape[:begin_norm_axis]) with invvar = 1 / sqrt(mean(x²) + epsilon).
absl::StatusOr<std::vector<TensorType>> RmsNormMeta(const InputTypes& in, const AttributeMap& attrs) {
  PDIST_RETURN_IF_ERROR(ops::ExpectFloat(in, 0, "x"));
  const TensorType& x = *in[0];
  PDIST_ASSIGN_OR_RETURN(NormSplit split, SplitAtNormAxis(x, attrs));
  PDIST_RETURN_IF_ERROR(CheckColumnParam(in, 1, "scale", x, split.cols));
  return std::vector<TensorType>{x, TensorType{split.leading, ComputeDtype(x.dtype)}};
}

// (x, scale, invvar, out_grad) → x_grad, scale_grad.
absl::StatusOr<std::vector<TensorType>> RmsNormGradMeta(const InputTypes& in, const AttributeMap& attrs) {
  PDIST_ASSIGN_OR_RETURN(std::vector<TensorType> fwd, RmsNormMeta({in[0], in[1]}, attrs));
  if (*in[2] != fwd[1]) {
    return absl::InvalidArgumentError(absl::StrCat("invvar must be ", fwd[1].ToString(), ", got ", in[2]->ToString()));
  }
  PDIST_RETURN_IF_ERROR(ops::ExpectSameType(in, 0, 3));
  return std::vector<TensorType>{*in[0], *in[1]};
}

absl::StatusOr<std::vector<Value*>> RmsNormGrad(Builder& b, const Operation& op, const std::vector<Value*>& out_grads) {
  if (out_grads[0] == nullptr) return std::vector<Value*>(op.num_operands(), nullptr);
  return EmitGradOp(b, op, "rms_norm_grad", {op.operand(0), op.operand(1), op.result(1), out_grads[0]}, {0, 1});
}

// FLOPs proportional to x's size; every operand and result moves once.
CostFn NormCost(double flops_per_x_element) {
  return [flops_per_x_element](const InputTypes& in, const std::vector<TensorType>& out, const AttributeMap&) {
    return OpCost{flops_per_x_element * static_cast<double>(in[0]->num_elements()), ops::TotalBytes(in, out)};
  };
}

}  // namespace

absl::Status RegisterNormOps(OpRegistry& registry) {
  PDIST_RETURN_IF_ERROR(RegisterSoftmaxPair(registry, "softmax"));
  PDIST_RETURN_IF_ERROR(RegisterSoftmaxPair(registry, "log_softmax"));

  const spmd::SpmdRuleFns layer_norm_rule = spmd::LayerNormRule();
  const spmd::SpmdRuleFns layer_norm_grad_rule = spmd::LayerNormGradRule();
  const std::vector<AttrSpec> layer_norm_attrs = {{"begin_norm_axis", int64_t{1}}, {"epsilon", 1e-5}};
  PDIST_RETURN_IF_ERROR(registry.Register(OpDef{
      .name = "layer_norm",
      .inputs = {{"x"}, {"scale", true}, {"bias", true}},
      .outputs = {{"out"}, {"mean"}, {"variance"}},
      .attrs = layer_norm_attrs,
      .infer_meta = LayerNormMeta,
      .grad = LayerNormGrad,
      .cost = NormCost(8),  // mean, centre, square, sum, rsqrt-scale, affine
      .infer_spmd = layer_norm_rule.infer,
      .infer_spmd_reverse = layer_norm_rule.reverse,
      .describe_spmd = layer_norm_rule.describe,
  }));
  PDIST_RETURN_IF_ERROR(registry.Register(OpDef{
      .name = "layer_norm_grad",
      .inputs = {{"x"}, {"scale", true}, {"bias", true}, {"mean"}, {"variance"}, {"out_grad"}},
      .outputs = {{"x_grad"}, {"scale_grad"}, {"bias_grad"}},
      .attrs = layer_norm_attrs,
      .infer_meta = LayerNormGradMeta,
      .grad_kind = GradKind::kGradientOp,
      .grad = nullptr,
      .cost = NormCost(12),
      .infer_spmd = layer_norm_grad_rule.infer,
      .infer_spmd_reverse = layer_norm_grad_rule.reverse,
      .describe_spmd = layer_norm_grad_rule.describe,
  }));

  // begin_norm_axis = -1 normalises the last axis, as LLaMA's RMSNorm and Paddle's
  // fused_rms_norm_ext do; epsilon 1e-6 is PaddleNLP's default.
  const spmd::SpmdRuleFns rms_norm_rule = spmd::RmsNormRule();
  const spmd::SpmdRuleFns rms_norm_grad_rule = spmd::RmsNormGradRule();
  const std::vector<AttrSpec> rms_norm_attrs = {{"begin_norm_axis", int64_t{-1}}, {"epsilon", 1e-6}};
  PDIST_RETURN_IF_ERROR(registry.Register(OpDef{
      .name = "rms_norm",
      .inputs = {{"x"}, {"scale"}},
      .outputs = {{"out"}, {"invvar"}},
      .attrs = rms_norm_attrs,
      .infer_meta = RmsNormMeta,
      .grad = RmsNormGrad,
      .cost = NormCost(5),
      .infer_spmd = rms_norm_rule.infer,
      .infer_spmd_reverse = rms_norm_rule.reverse,
      .describe_spmd = rms_norm_rule.describe,
  }));
  return registry.Register(OpDef{
      .name = "rms_norm_grad",
      .inputs = {{"x"}, {"scale"}, {"invvar"}, {"out_grad"}},
      .outputs = {{"x_grad"}, {"scale_grad"}},
      .attrs = rms_norm_attrs,
      .infer_meta = RmsNormGradMeta,
      .grad_kind = GradKind::kGradientOp,
      .grad = nullptr,
      .cost = NormCost(9),
      .infer_spmd = rms_norm_grad_rule.infer,
      .infer_spmd_reverse = rms_norm_grad_rule.reverse,
      .describe_spmd = rms_norm_grad_rule.describe,
  });
}

}  // namespace pdist::ir
