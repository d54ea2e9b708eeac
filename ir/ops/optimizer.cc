// Optimizer ops: sgd, momentum, adamw. They compute new values of a parameter and its states;
// the program binds them back with `update` lines (see StateUpdate in ir/program.h):
//
//   %9, %10, %11, %12, %13 = adamw(%w, %w_grad, %lr, %m1, %m2, %b1p, %b2p) {beta1 = 0.9, ...}
//   update %w <- %9
//   update %m1 <- %10  ...
//
// Input order follows Paddle (sgd_: param, learning_rate, grad; momentum_: param, grad,
// velocity, learning_rate; adamw_: param, grad, learning_rate, moment1, moment2, beta1_pow,
// beta2_pow), each followed by an optional skip_update: a scalar that, when > 0, makes every
// result equal its operand (a step skipped after a gradient overflow under dynamic loss scaling;
// Paddle's adamw has the same input). Paddle's master_param / multi_precision inputs are not
// needed: the optimizer pass runs the update on an f32 master weight as the param and casts the
// result back (passes/optimizer.h). amsgrad is not supported.
#include "absl/strings/str_cat.h"
#include "ir/op_def.h"
#include "ir/ops/op_families.h"
#include "ir/ops/op_helpers.h"
#include "ir/spmd/rules_nn.h"
#include "ir/status.h"

namespace pdist::ir {
namespace {

// A hyper-parameter tensor (learning rate, beta power): one floating-point element, shape []
// or [1]; its dtype may differ from the parameter's (Paddle keeps it f32).
absl::Status ExpectScalar(const InputTypes& in, size_t index, const char* what) {
  const TensorType* t = in[index];
  if (!IsFloatingPoint(t->dtype) || t->num_elements() != 1 || t->rank() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " must be a float tensor of shape [] or [1], got ", t->ToString()));
  }
  return absl::OkStatus();
}

// The optional skip_update at `index`: absent, or a scalar like the learning rate.
absl::Status ExpectSkipUpdate(const InputTypes& in, size_t index) {
  return index < in.size() && in[index] != nullptr ? ExpectScalar(in, index, "skip_update") : absl::OkStatus();
}

// The parameter at `param` is floating point, and each of `same` has exactly its type. The
// gradient at `grad` has the parameter's type too, or its shape in bf16/f16 when the parameter is
// an f32 master weight (mixed precision: the kernel reads the low-precision gradient as f32, so
// no f32 copy of every gradient is made; Paddle's multi_precision kernels do the same).
absl::Status ExpectLikeParam(const InputTypes& in, size_t param, size_t grad, std::initializer_list<size_t> same) {
  PDIST_RETURN_IF_ERROR(ops::ExpectFloat(in, param, "param"));
  for (size_t i : same) PDIST_RETURN_IF_ERROR(ops::ExpectSameType(in, param, i));
  const DataType g = in[grad]->dtype;
  if (IsLowPrecisionFloat(g) && in[param]->dtype == DataType::kFloat32 &&
      in[grad]->shape == in[param]->shape) {
    return absl::OkStatus();
  }
  return ops::ExpectSameType(in, param, grad);
}

// (param, learning_rate, grad) → param_out.
absl::StatusOr<std::vector<TensorType>> SgdMeta(const InputTypes& in, const AttributeMap&) {
  PDIST_RETURN_IF_ERROR(ExpectLikeParam(in, 0, /*grad=*/2, {}));
  PDIST_RETURN_IF_ERROR(ExpectScalar(in, 1, "learning_rate"));
  PDIST_RETURN_IF_ERROR(ExpectSkipUpdate(in, 3));
  return std::vector<TensorType>{*in[0]};
}

// (param, grad, velocity, learning_rate) → param_out, velocity_out.
absl::StatusOr<std::vector<TensorType>> MomentumMeta(const InputTypes& in, const AttributeMap&) {
  PDIST_RETURN_IF_ERROR(ExpectLikeParam(in, 0, /*grad=*/1, {2}));
  PDIST_RETURN_IF_ERROR(ExpectScalar(in, 3, "learning_rate"));
  PDIST_RETURN_IF_ERROR(ExpectSkipUpdate(in, 4));
  return std::vector<TensorType>{*in[0], *in[2]};
}

// (param, grad, learning_rate, moment1, moment2, beta1_pow, beta2_pow)
//   → param_out, moment1_out, moment2_out, beta1_pow_out, beta2_pow_out.
absl::StatusOr<std::vector<TensorType>> AdamWMeta(const InputTypes& in, const AttributeMap&) {
  PDIST_RETURN_IF_ERROR(ExpectLikeParam(in, 0, /*grad=*/1, {3, 4}));
  PDIST_RETURN_IF_ERROR(ExpectScalar(in, 2, "learning_rate"));
  PDIST_RETURN_IF_ERROR(ExpectScalar(in, 5, "beta1_pow"));
  PDIST_RETURN_IF_ERROR(ExpectScalar(in, 6, "beta2_pow"));
  PDIST_RETURN_IF_ERROR(ExpectSkipUpdate(in, 7));
  return std::vector<TensorType>{*in[0], *in[3], *in[4], *in[5], *in[6]};
}

// merged_adamw: (learning_rate, skip_update?, then per parameter: param, grad, moment1, moment2,
// beta1_pow, beta2_pow) → per parameter: param_out, moment1_out, moment2_out, beta1_pow_out,
// beta2_pow_out. Each group is checked as adamw checks its operands; all groups share the
// parameter's and the gradient's dtypes, so that one kernel instance updates them all.
constexpr size_t kMergedHead = 2, kMergedGroup = 6;

absl::StatusOr<std::vector<TensorType>> MergedAdamWMeta(const InputTypes& in, const AttributeMap& attrs) {
  const size_t tensors = in.size() < kMergedHead ? 0 : in.size() - kMergedHead;
  if (tensors == 0 || tensors % kMergedGroup != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "merged_adamw takes learning_rate, skip_update (or none) and 6 operands per parameter (param, grad, "
        "moment1, moment2, beta1_pow, beta2_pow); got ", in.size(), " operands"));
  }
  std::vector<TensorType> out;
  for (size_t g = 0; g < tensors / kMergedGroup; ++g) {
    const size_t at = kMergedHead + g * kMergedGroup;
    const InputTypes group = {in[at], in[at + 1], in[0], in[at + 2], in[at + 3], in[at + 4], in[at + 5], in[1]};
    absl::StatusOr<std::vector<TensorType>> results = AdamWMeta(group, attrs);
    if (!results.ok()) return WithContext(results.status(), absl::StrCat("merged_adamw, parameter ", g));
    if (g > 0 && (in[at]->dtype != in[kMergedHead]->dtype || in[at + 1]->dtype != in[kMergedHead + 1]->dtype)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "merged_adamw, parameter ", g, ": ", DataTypeName(in[at]->dtype), " with a ",
          DataTypeName(in[at + 1]->dtype), " gradient where parameter 0 is ", DataTypeName(in[kMergedHead]->dtype),
          " with ", DataTypeName(in[kMergedHead + 1]->dtype), "; merge only parameters of one dtype"));
    }
    out.insert(out.end(), results->begin(), results->end());
  }
  return out;
}

// adamw's and merged_adamw's hyper-parameters.
std::vector<AttrSpec> AdamWAttrs() {
  return {{"beta1", 0.9}, {"beta2", 0.999}, {"epsilon", 1e-8}, {"lr_ratio", 1.0}, {"coeff", 0.01}, {"with_decay", true}};
}

CostFn UpdateCost(double flops_per_element) {
  return [flops_per_element](const InputTypes& in, const std::vector<TensorType>& out, const AttributeMap&) {
    return OpCost{flops_per_element * static_cast<double>(in[0]->num_elements()), ops::TotalBytes(in, out)};
  };
}

}  // namespace

absl::Status RegisterOptimizerOps(OpRegistry& registry) {
  const spmd::SpmdRuleFns sgd_rule = spmd::SgdRule();
  const spmd::SpmdRuleFns momentum_rule = spmd::MomentumRule();
  const spmd::SpmdRuleFns adamw_rule = spmd::AdamWRule();
  // param_out = param - learning_rate * grad.
  PDIST_RETURN_IF_ERROR(registry.Register(OpDef{
      .name = "sgd",
      .inputs = {{"param"}, {"learning_rate"}, {"grad"}, {.name = "skip_update", .optional = true}},
      .outputs = {{"param_out"}},
      .attrs = {},
      .infer_meta = SgdMeta,
      .grad_kind = GradKind::kNotDifferentiable,
      .grad = nullptr,
      .cost = UpdateCost(2),
      .infer_spmd = sgd_rule.infer,
      .infer_spmd_reverse = sgd_rule.reverse,
      .describe_spmd = sgd_rule.describe,
  }));

  // Paddle's momentum with L2 regularisation (its regularization_method = "l2_decay" whenever
  // regularization_coeff is non-zero):
  //   g = grad + regularization_coeff * param
  //   velocity_out = mu * velocity + g
  //   param_out = param - lr * (g + mu * velocity_out)   if use_nesterov
  //             = param - lr * velocity_out              otherwise
  PDIST_RETURN_IF_ERROR(registry.Register(OpDef{
      .name = "momentum",
      .inputs = {{"param"}, {"grad"}, {"velocity"}, {"learning_rate"}, {.name = "skip_update", .optional = true}},
      .outputs = {{"param_out"}, {"velocity_out"}},
      .attrs = {{"mu", 0.9}, {"use_nesterov", false}, {"regularization_coeff", 0.0}},
      .infer_meta = MomentumMeta,
      .grad_kind = GradKind::kNotDifferentiable,
      .grad = nullptr,
      .cost = UpdateCost(5),
      .infer_spmd = momentum_rule.infer,
      .infer_spmd_reverse = momentum_rule.reverse,
      .describe_spmd = momentum_rule.describe,
  }));

  // Paddle's adamw (decoupled weight decay, bias correction folded into the step size), with
  // lr = learning_rate * lr_ratio and beta{1,2}_pow = beta{1,2}^t at step t (initialise them to
  // beta1 and beta2):
  //   param  = param * (1 - lr * coeff)                     if with_decay
  //   m1_out = beta1 * m1 + (1 - beta1) * grad
  //   m2_out = beta2 * m2 + (1 - beta2) * grad²
  //   lr_t   = lr * sqrt(1 - beta2_pow) / (1 - beta1_pow)
  //   param_out = param - lr_t * m1_out / (sqrt(m2_out) + epsilon * sqrt(1 - beta2_pow))
  //   beta1_pow_out = beta1_pow * beta1,  beta2_pow_out = beta2_pow * beta2
  // The last line equals m̂ / (sqrt(v̂) + epsilon) with the usual bias-corrected moments.
  PDIST_RETURN_IF_ERROR(registry.Register(OpDef{
      .name = "adamw",
      .inputs = {{"param"}, {"grad"}, {"learning_rate"}, {"moment1"}, {"moment2"}, {"beta1_pow"}, {"beta2_pow"},
                 {.name = "skip_update", .optional = true}},
      .outputs = {{"param_out"}, {"moment1_out"}, {"moment2_out"}, {"beta1_pow_out"}, {"beta2_pow_out"}},
      .attrs = AdamWAttrs(),
      .infer_meta = AdamWMeta,
      .grad_kind = GradKind::kNotDifferentiable,
      .grad = nullptr,
      .cost = UpdateCost(14),
      .infer_spmd = adamw_rule.infer,
      .infer_spmd_reverse = adamw_rule.reverse,
      .describe_spmd = adamw_rule.describe,
  }));

  // adamw on many parameters at once (Paddle's merged_adam, with adamw's decoupled decay): what
  // the fuse-optimizer pass makes of a rank's adamw ops of one dtype, so that a GPU updates them
  // in a few launches instead of one per parameter (passes/fuse_optimizer.h). Every parameter's
  // results are bit for bit what its own adamw computes.
  //   %w0', %m0', %v0', %b0', %c0', %w1', ... = merged_adamw(%lr, none, %w0, %g0, %m0, %v0, %b0, %c0, %w1, ...)
  OpDef merged{
      .name = "merged_adamw",
      .inputs = {{"learning_rate"}, {.name = "skip_update", .optional = true}, {.name = "params_and_states", .variadic = true}},
      .outputs = {{.name = "params_and_states_out", .variadic = true}},
      .attrs = AdamWAttrs(),
      .infer_meta = MergedAdamWMeta,
      .cost = [](const InputTypes& in, const std::vector<TensorType>& out, const AttributeMap&) {
        double elements = 0;
        for (size_t at = kMergedHead; at + kMergedGroup <= in.size(); at += kMergedGroup) {
          elements += static_cast<double>(in[at]->num_elements());
        }
        return OpCost{14 * elements, ops::TotalBytes(in, out)};
      },
  };
  ops::MarkLocalOnly(merged, "adamw on several parameters: each group of operands follows adamw's rule");
  return registry.Register(std::move(merged));
}

}  // namespace pdist::ir
