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
// Paddle's adamw has the same input). Paddle's master_param input is not needed: the optimizer
// pass runs the update on an f32 master weight as the param and casts the result back
// (passes/optimizer.h); the merged forms fold that cast in (`multi_precision`,
// ir/ops/merged_updates.h). amsgrad is not supported.
#include <string>

#include "absl/strings/str_cat.h"
#include "ir/op_def.h"
#include "ir/ops/merged_updates.h"
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

// Parameter p's operand types of a merged op laid out as its base op takes them.
InputTypes BaseInputs(const MergedUpdate& m, const InputTypes& in, size_t p) {
  return BaseOperands<const TensorType*>(m, p, [&in](size_t i) { return in[i]; });
}

// A merged op's types (ir/ops/merged_updates.h): each parameter's group checked as its base op
// checks its operands (`base_meta`), every group with the first one's dtypes, so that one kernel
// instance updates them all.
InferMetaFn MergedMeta(const MergedUpdate& m, InferMetaFn base_meta) {
  return [m, base_meta](const InputTypes& in, const AttributeMap& attrs) -> absl::StatusOr<std::vector<TensorType>> {
    const size_t group = m.per_parameter.size();
    const size_t tensors = in.size() < kMergedSharedOperands ? 0 : in.size() - kMergedSharedOperands;
    if (tensors == 0 || tensors % group != 0) {
      return absl::InvalidArgumentError(absl::StrCat(m.merged, " takes learning_rate, skip_update (or none) and ", group,
                                                     " operands per parameter (those of ", m.base, "); got ",
                                                     in.size(), " operands"));
    }
    std::vector<TensorType> out;
    for (size_t p = 0; p < MergedParameters(m, in.size()); ++p) {
      for (size_t k = 0; k < group; ++k) {
        const TensorType* t = in[MergedOperand(m, p, k)];
        const TensorType* first = in[MergedOperand(m, 0, k)];
        if (t->dtype != first->dtype) {
          return absl::InvalidArgumentError(absl::StrCat(m.merged, ", parameter ", p, ": operand ", k, " is ",
                                                         DataTypeName(t->dtype), " where parameter 0's is ",
                                                         DataTypeName(first->dtype), "; merge only like updates"));
        }
      }
      const InputTypes base = BaseInputs(m, in, p);
      absl::StatusOr<std::vector<TensorType>> results = base_meta(base, attrs);
      if (!results.ok()) return WithContext(results.status(), absl::StrCat(m.merged, ", parameter ", p));
      out.insert(out.end(), results->begin(), results->end());
      if (IsMultiPrecision(attrs)) {
        const TensorType& param = *base[0];
        const TensorType& grad = *base[m.grad];
        if (param.dtype != DataType::kFloat32 || !IsLowPrecisionFloat(grad.dtype)) {
          return absl::InvalidArgumentError(absl::StrCat(
              m.merged, ", parameter ", p, ": multi_precision updates an f32 master weight from a bf16/f16 gradient; got ",
              param.ToString(), " and gradient ", grad.ToString(), " (leave multi_precision false)"));
        }
        out.push_back(TensorType{param.shape, grad.dtype});  // the master rounded to the gradient's dtype
      }
    }
    return out;
  };
}

// The merged form of a registered base op: its attributes and multi_precision; its cost the
// base's summed over the parameters, plus the rounded copies' writes.
absl::Status RegisterMerged(OpRegistry& registry, const MergedUpdate& m) {
  const OpDef* base = registry.Find(m.base);
  if (base == nullptr) return absl::FailedPreconditionError(absl::StrCat(m.merged, " needs ", m.base, " registered first"));
  std::vector<AttrSpec> attrs = base->attrs;
  attrs.push_back({kMultiPrecision, false});
  OpDef merged{
      .name = m.merged,
      .inputs = {{"learning_rate"}, {.name = "skip_update", .optional = true}, {.name = "params_and_states", .variadic = true}},
      .outputs = {{.name = "params_and_states_out", .variadic = true}},
      .attrs = std::move(attrs),
      .infer_meta = MergedMeta(m, base->infer_meta),
      .cost = [m, base_cost = base->cost](const InputTypes& in, const std::vector<TensorType>& out,
                                          const AttributeMap& attrs) {
        OpCost total;
        const size_t per_parameter = MergedResults(m, attrs);
        for (size_t p = 0; p < MergedParameters(m, in.size()); ++p) {
          const auto first = out.begin() + static_cast<std::ptrdiff_t>(p * per_parameter);
          const std::vector<TensorType> results(first, first + static_cast<std::ptrdiff_t>(m.results));
          const OpCost one = base_cost(BaseInputs(m, in, p), results, attrs);
          total.flops += one.flops;
          total.bytes += one.bytes;
          if (per_parameter > m.results) total.bytes += static_cast<double>(out[p * per_parameter + m.results].num_bytes());
        }
        return total;
      },
  };
  ops::MarkLocalOnly(merged, absl::StrCat(m.base, " on several parameters: each group of operands follows ", m.base,
                                          "'s rule"));
  return registry.Register(std::move(merged));
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
      .attrs = {{"beta1", 0.9},
                {"beta2", 0.999},
                {"epsilon", 1e-8},
                {"lr_ratio", 1.0},
                {"coeff", 0.01},
                {"with_decay", true}},
      .infer_meta = AdamWMeta,
      .grad_kind = GradKind::kNotDifferentiable,
      .grad = nullptr,
      .cost = UpdateCost(14),
      .infer_spmd = adamw_rule.infer,
      .infer_spmd_reverse = adamw_rule.reverse,
      .describe_spmd = adamw_rule.describe,
  }));

  // The merged forms (ir/ops/merged_updates.h): what the fuse-optimizer pass makes of a rank's
  // updates of one kind and dtype, so that a GPU runs them in a launch per 24 parameters instead
  // of one each (passes/fuse_optimizer.h). Every parameter's results are bit for bit its own op's.
  for (const MergedUpdate& m : MergedUpdates()) PDIST_RETURN_IF_ERROR(RegisterMerged(registry, m));
  return absl::OkStatus();
}

}  // namespace pdist::ir
