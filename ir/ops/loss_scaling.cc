// Dynamic loss scaling (Micikevicius et al., 2018; Paddle's check_finite_and_unscale and
// update_loss_scaling): the ops the loss-scaling pass (passes/loss_scaling.h) builds from.
//
//   %c = count_nonfinite(%g) : f32[]        how many elements of %g are inf or nan
//   %f, %s', %good', %bad', %skipped' = update_loss_scaling(%c, %s, %good, %bad, %skipped)
//       {incr_every_n_steps = 1000, decr_every_n_nan_or_inf = 2, incr_ratio = 2.0, decr_ratio = 0.5}
//
// update_loss_scaling follows Paddle's rule: after an overflow (found_inf > 0) good = 0, bad + 1,
// and every decr_every_n_nan_or_inf-th consecutive overflow scale *= decr_ratio (never below 1);
// after a clean step bad = 0, good + 1, and every incr_every_n_steps-th consecutive clean step
// scale *= incr_ratio (kept when that is not finite). pdist adds `skipped`, the run's count of
// skipped steps, and passes found_inf through as `found_inf_out`: the optimizer ops read that one,
// so the whole, replicated count is what every update sees (one all-reduce, not one per update).
//
// count_nonfinite of a Partial tensor is Partial (a sum of partial pieces is non-finite exactly
// when some piece is, for pieces whose sum cannot overflow: the f32 gradients it counts).
#include "absl/strings/str_cat.h"
#include "ir/op_def.h"
#include "ir/ops/op_families.h"
#include "ir/ops/op_helpers.h"
#include "ir/spmd/rules.h"
#include "ir/spmd/rules_nn.h"
#include "ir/status.h"

namespace pdist::ir {
namespace {

absl::StatusOr<std::vector<TensorType>> CountNonfiniteMeta(const InputTypes& in, const AttributeMap& attrs) {
  PDIST_RETURN_IF_ERROR(ops::ExpectFloat(in, 0, "x"));
  PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> axis, GetIntList(attrs, "axis"));
  PDIST_ASSIGN_OR_RETURN(bool keep_dim, GetBool(attrs, "keep_dim"));
  if (!axis.empty() || keep_dim) {
    return absl::InvalidArgumentError("count_nonfinite counts over every axis: axis must be [] and keep_dim false");
  }
  return std::vector<TensorType>{{{}, DataType::kFloat32}};
}

// Every operand one float element of shape [] or [1] (the pass makes them f32); the results are
// the operands' types.
absl::StatusOr<std::vector<TensorType>> UpdateLossScalingMeta(const InputTypes& in, const AttributeMap& attrs) {
  static constexpr const char* kNames[] = {"found_inf", "loss_scaling", "good_steps", "bad_steps", "skipped_steps"};
  std::vector<TensorType> out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!IsFloatingPoint(in[i]->dtype) || in[i]->num_elements() != 1 || in[i]->rank() > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(kNames[i], " must be a float of shape [] or [1], got ", in[i]->ToString()));
    }
    out.push_back(*in[i]);
  }
  PDIST_ASSIGN_OR_RETURN(int64_t incr_every, GetInt(attrs, "incr_every_n_steps"));
  PDIST_ASSIGN_OR_RETURN(int64_t decr_every, GetInt(attrs, "decr_every_n_nan_or_inf"));
  PDIST_ASSIGN_OR_RETURN(double incr_ratio, GetDouble(attrs, "incr_ratio"));
  PDIST_ASSIGN_OR_RETURN(double decr_ratio, GetDouble(attrs, "decr_ratio"));
  if (incr_every < 1 || decr_every < 1) {
    return absl::InvalidArgumentError(absl::StrCat("incr_every_n_steps (", incr_every, ") and decr_every_n_nan_or_inf (",
                                                   decr_every, ") must be >= 1"));
  }
  if (!(incr_ratio > 1.0) || !(decr_ratio > 0.0 && decr_ratio < 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat("incr_ratio must be > 1 (got ", incr_ratio,
                                                   ") and decr_ratio in (0, 1) (got ", decr_ratio, ")"));
  }
  return out;
}

CostFn CountCost() {
  return [](const InputTypes& in, const std::vector<TensorType>& out, const AttributeMap&) {
    return OpCost{static_cast<double>(in[0]->num_elements()), ops::TotalBytes(in, out)};
  };
}

}  // namespace

absl::Status RegisterLossScalingOps(OpRegistry& registry) {
  const spmd::SpmdRuleFns count_rule = spmd::ReductionRule("count_nonfinite", spmd::ReductionKind::kSum);
  PDIST_RETURN_IF_ERROR(registry.Register(OpDef{
      .name = "count_nonfinite",
      .inputs = {{"x"}},
      .outputs = {{"out"}},
      .attrs = {{"axis", std::vector<int64_t>{}}, {"keep_dim", false}},
      .infer_meta = CountNonfiniteMeta,
      .grad_kind = GradKind::kNotDifferentiable,
      .grad = nullptr,
      .cost = CountCost(),
      .infer_spmd = count_rule.infer,
      .infer_spmd_reverse = count_rule.reverse,
      .describe_spmd = count_rule.describe,
  }));
  const spmd::SpmdRuleFns update_rule = spmd::UpdateLossScalingRule();
  return registry.Register(OpDef{
      .name = "update_loss_scaling",
      .inputs = {{"found_inf"}, {"loss_scaling"}, {"good_steps"}, {"bad_steps"}, {"skipped_steps"}},
      .outputs = {{"found_inf_out"}, {"loss_scaling_out"}, {"good_steps_out"}, {"bad_steps_out"}, {"skipped_steps_out"}},
      .attrs = {{"incr_every_n_steps", int64_t{1000}},
                {"decr_every_n_nan_or_inf", int64_t{2}},
                {"incr_ratio", 2.0},
                {"decr_ratio", 0.5}},
      .infer_meta = UpdateLossScalingMeta,
      .grad_kind = GradKind::kNotDifferentiable,
      .grad = nullptr,
      .cost = [](const InputTypes& in, const std::vector<TensorType>& out,
                 const AttributeMap&) { return OpCost{8, ops::TotalBytes(in, out)}; },
      .infer_spmd = update_rule.infer,
      .infer_spmd_reverse = update_rule.reverse,
      .describe_spmd = update_rule.describe,
  });
}

}  // namespace pdist::ir
