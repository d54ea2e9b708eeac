// Unary elementwise ops: scale, the activations relu gelu silu tanh exp sigmoid erf sqrt rsqrt
// (with their gradient ops), cast and dropout (with dropout_grad).
//
//   %1 = gelu(%0) {approximate = false} : f32[8,64]
//   %2 = gelu_grad(%0, %g) {approximate = false} : f32[8,64]
//   %3, %4 = dropout(%0) {is_test = false, mode = "upscale_in_train", p = 0.1, seed = 7}
//            : f32[8,64], bool[8,64]
//
// Gradients follow Paddle: relu/tanh/exp/sigmoid/sqrt/rsqrt grads read the forward output,
// gelu/silu/erf grads read x,
// scale's gradient is `scale` with bias 0, cast's gradient is a cast back (none when either side
// is not floating point).
//
// dropout: the mask is a bool tensor (Paddle uses uint8; pdist has no uint8), true where the
// element is kept. It is a pure function of (seed, element index) — see the kernel — so one seed
// gives the same mask in every run, on any thread count. The optional `seed_tensor` input (an
// integer scalar) overrides the `seed` attribute, which is how a trainer draws a fresh mask per
// step; Paddle's `fix_seed` is implied (pdist never seeds from the clock). Distinct dropout ops
// need distinct seeds, or their masks coincide.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ir/op_def.h"
#include "ir/ops/op_families.h"
#include "ir/ops/op_helpers.h"
#include "ir/spmd/rules.h"
#include "ir/status.h"

namespace pdist::ir {
namespace {

using ops::SetSpmd;

std::vector<Value*> NoGrads(const Operation& op) { return std::vector<Value*>(op.num_operands(), nullptr); }

bool HasGrad(const std::vector<Value*>& out_grads) { return !out_grads.empty() && out_grads[0] != nullptr; }

CostFn PerElementCost(double flops) {
  return [flops](const InputTypes& in, const std::vector<TensorType>& out, const AttributeMap&) {
    return ops::ElementwiseCost(in, out, flops);
  };
}

// x (floating point) → out of the same type.
absl::StatusOr<std::vector<TensorType>> InferFloatUnary(const InputTypes& in, const AttributeMap&) {
  PDIST_RETURN_IF_ERROR(ops::ExpectFloat(in, 0, "x"));
  return std::vector<TensorType>{*in[0]};
}

// (saved, out_grad) → x_grad, where saved is x or out: all three share one type.
absl::StatusOr<std::vector<TensorType>> InferUnaryGrad(const InputTypes& in, const AttributeMap&) {
  PDIST_RETURN_IF_ERROR(ops::ExpectFloat(in, 0, "the saved forward tensor"));
  PDIST_RETURN_IF_ERROR(ops::ExpectSameType(in, 0, 1));
  return std::vector<TensorType>{*in[0]};
}

struct Activation {
  const char* name;
  bool grad_reads_out;  // the grad op takes (out, out_grad) rather than (x, out_grad)
  double flops;         // per element, forward
  double grad_flops;    // per element, gradient op
  std::vector<AttrSpec> attrs;
};

const std::vector<Activation>& Activations() {
  static const std::vector<Activation> kActivations = {
      {"relu", true, 1, 1, {}},
      {"gelu", false, 20, 30, {{"approximate", false}}},  // erf or tanh form
      {"silu", false, 5, 8, {}},
      {"tanh", true, 10, 3, {}},
      {"exp", true, 10, 1, {}},
      {"sigmoid", true, 12, 3, {}},  // σ' = σ (1 − σ)
      {"erf", false, 15, 12, {}},    // erf' = 2/√π e^(−x²)
      {"sqrt", true, 4, 2, {}},      // sqrt' = 1 / (2 sqrt x)
      {"rsqrt", true, 5, 3, {}},     // rsqrt' = −rsqrt³ / 2
  };
  return kActivations;
}

absl::Status RegisterActivation(OpRegistry& registry, const Activation& spec) {
  const std::string grad_name = absl::StrCat(spec.name, "_grad");
  OpDef op;
  op.name = spec.name;
  op.inputs = {{"x"}};
  op.outputs = {{"out"}};
  op.attrs = spec.attrs;
  op.infer_meta = InferFloatUnary;
  op.grad = [grad_name, reads_out = spec.grad_reads_out](Builder& b, const Operation& fwd,
                                                         const std::vector<Value*>& out_grads)
      -> absl::StatusOr<std::vector<Value*>> {
    if (!HasGrad(out_grads)) return NoGrads(fwd);
    Value* saved = reads_out ? fwd.result(0) : fwd.operand(0);
    return ops::EmitGradOp(b, fwd, grad_name, {saved, out_grads[0]}, {0});
  };
  op.cost = PerElementCost(spec.flops);
  SetSpmd(op, spmd::UnaryRule(spec.name, spmd::UnaryKind::kNonLinear));
  PDIST_RETURN_IF_ERROR(registry.Register(std::move(op)));

  OpDef grad;
  grad.name = grad_name;
  grad.inputs = {{spec.grad_reads_out ? "out" : "x"}, {"out_grad"}};
  grad.outputs = {{"x_grad"}};
  grad.attrs = spec.attrs;
  grad.infer_meta = InferUnaryGrad;
  grad.grad_kind = GradKind::kGradientOp;
  grad.cost = PerElementCost(spec.grad_flops);
  SetSpmd(grad, spmd::UnaryGradRule(grad_name, spec.grad_reads_out ? "out" : "x"));
  // Each x_grad element reads only the same element of both operands: written over whichever
  // dies here (the output gradient, made for this op alone; the saved value, at its last reader).
  grad.overwrites_dying_operand = {{0, 1}, {0, 0}};
  return registry.Register(std::move(grad));
}

// scale: out = scale * x + bias (bias_after_scale) or scale * (x + bias).
absl::Status RegisterScale(OpRegistry& registry) {
  OpDef op;
  op.name = "scale";
  op.inputs = {{"x"}};
  op.outputs = {{"out"}};
  op.attrs = {{"scale", 1.0}, {"bias", 0.0}, {"bias_after_scale", true}};
  op.infer_meta = InferFloatUnary;
  op.grad = [](Builder& b, const Operation& fwd,
               const std::vector<Value*>& out_grads) -> absl::StatusOr<std::vector<Value*>> {
    if (!HasGrad(out_grads)) return NoGrads(fwd);
    PDIST_ASSIGN_OR_RETURN(double scale, GetDouble(fwd.attrs(), "scale"));
    PDIST_ASSIGN_OR_RETURN(Value * x_grad, b.Op1("scale", {out_grads[0]}, {{"scale", scale}, {"bias", 0.0}}));
    return std::vector<Value*>{x_grad};
  };
  op.cost = PerElementCost(2);
  SetSpmd(op, spmd::UnaryRule("scale", spmd::UnaryKind::kScale));
  return registry.Register(std::move(op));
}

// cast: any dtype to any dtype, converting through double.
absl::Status RegisterCast(OpRegistry& registry) {
  OpDef op;
  op.name = "cast";
  op.inputs = {{"x"}};
  op.outputs = {{"out"}};
  op.attrs = {{"dtype", DataType::kFloat32}};
  op.infer_meta = [](const InputTypes& in, const AttributeMap& attrs) -> absl::StatusOr<std::vector<TensorType>> {
    PDIST_ASSIGN_OR_RETURN(DataType dtype, GetDataType(attrs, "dtype"));
    return std::vector<TensorType>{{in[0]->shape, dtype}};
  };
  op.grad = [](Builder& b, const Operation& fwd,
               const std::vector<Value*>& out_grads) -> absl::StatusOr<std::vector<Value*>> {
    const DataType from = fwd.operand(0)->type().dtype;
    if (!HasGrad(out_grads) || !IsFloatingPoint(from) || !IsFloatingPoint(fwd.result(0)->type().dtype)) {
      return NoGrads(fwd);
    }
    PDIST_ASSIGN_OR_RETURN(Value * x_grad, b.Op1("cast", {out_grads[0]}, {{"dtype", from}}));
    return std::vector<Value*>{x_grad};
  };
  op.cost = PerElementCost(0);
  SetSpmd(op, spmd::UnaryRule("cast", spmd::UnaryKind::kCast));
  return registry.Register(std::move(op));
}

absl::Status CheckDropoutAttrs(const AttributeMap& attrs) {
  PDIST_ASSIGN_OR_RETURN(double p, GetDouble(attrs, "p"));
  if (!(p >= 0.0 && p <= 1.0)) return absl::InvalidArgumentError(absl::StrCat("p must be in [0, 1], got ", p));
  PDIST_ASSIGN_OR_RETURN(std::string mode, GetString(attrs, "mode"));
  if (mode != "upscale_in_train" && mode != "downgrade_in_infer") {
    return absl::InvalidArgumentError(
        absl::StrCat("mode must be \"upscale_in_train\" or \"downgrade_in_infer\", got \"", mode, "\""));
  }
  return absl::OkStatus();
}

// dropout(x, seed_tensor?) → (out, mask); dropout_grad(mask, out_grad) → x_grad.
absl::Status RegisterDropout(OpRegistry& registry) {
  const std::vector<AttrSpec> common = {{"p", 0.5}, {"is_test", false}, {"mode", std::string("upscale_in_train")}};
  OpDef op;
  op.name = "dropout";
  op.inputs = {{"x"}, {"seed_tensor", /*optional=*/true}};
  op.outputs = {{"out"}, {"mask"}};
  op.attrs = common;
  op.attrs.push_back({"seed", int64_t{0}});
  op.infer_meta = [](const InputTypes& in, const AttributeMap& attrs) -> absl::StatusOr<std::vector<TensorType>> {
    PDIST_RETURN_IF_ERROR(ops::ExpectFloat(in, 0, "x"));
    PDIST_RETURN_IF_ERROR(CheckDropoutAttrs(attrs));
    if (in.size() > 1 && in[1] != nullptr) {
      const TensorType& seed = *in[1];
      if ((seed.dtype != DataType::kInt32 && seed.dtype != DataType::kInt64) || seed.num_elements() != 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("seed_tensor must be an i32 or i64 tensor of one element, got ", seed.ToString()));
      }
    }
    return std::vector<TensorType>{*in[0], {in[0]->shape, DataType::kBool}};
  };
  op.grad = [](Builder& b, const Operation& fwd,
               const std::vector<Value*>& out_grads) -> absl::StatusOr<std::vector<Value*>> {
    if (!HasGrad(out_grads)) return NoGrads(fwd);
    AttributeMap attrs;
    for (const char* name : {"p", "is_test", "mode"}) attrs.emplace(name, fwd.attrs().at(name));
    return ops::EmitGradOp(b, fwd, "dropout_grad", {fwd.result(1), out_grads[0]}, {0}, attrs);
  };
  op.cost = PerElementCost(4);
  SetSpmd(op, spmd::DropoutRule());
  PDIST_RETURN_IF_ERROR(registry.Register(std::move(op)));

  OpDef grad;
  grad.name = "dropout_grad";
  grad.inputs = {{"mask"}, {"out_grad"}};
  grad.outputs = {{"x_grad"}};
  grad.attrs = common;
  grad.infer_meta = [](const InputTypes& in, const AttributeMap& attrs) -> absl::StatusOr<std::vector<TensorType>> {
    PDIST_RETURN_IF_ERROR(ops::ExpectFloat(in, 1, "out_grad"));
    PDIST_RETURN_IF_ERROR(CheckDropoutAttrs(attrs));
    if (in[0]->dtype != DataType::kBool || in[0]->shape != in[1]->shape) {
      return absl::InvalidArgumentError(absl::StrCat("mask must be bool", ShapeToString(in[1]->shape),
                                                     " (the shape of out_grad), got ", in[0]->ToString()));
    }
    return std::vector<TensorType>{*in[1]};
  };
  grad.grad_kind = GradKind::kGradientOp;
  grad.cost = PerElementCost(2);
  SetSpmd(grad, spmd::UnaryGradRule("dropout_grad", "mask"));
  grad.overwrites_dying_operand = {{0, 1}};  // x_grad[i] reads only mask[i] and out_grad[i]
  return registry.Register(std::move(grad));
}

}  // namespace

absl::Status RegisterActivationOps(OpRegistry& registry) {
  PDIST_RETURN_IF_ERROR(RegisterScale(registry));
  for (const Activation& spec : Activations()) PDIST_RETURN_IF_ERROR(RegisterActivation(registry, spec));
  PDIST_RETURN_IF_ERROR(RegisterCast(registry));
  return RegisterDropout(registry);
}

}  // namespace pdist::ir
