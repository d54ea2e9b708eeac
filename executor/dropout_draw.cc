// PlanDropoutDraw: a dropout op's attributes as the numbers its kernels draw with.
#include "executor/dropout_draw.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "executor/random.h"
#include "ir/status.h"

namespace pdist::exec {

absl::StatusOr<double> DropoutFactor(const ir::AttributeMap& attrs) {
  PDIST_ASSIGN_OR_RETURN(double p, ir::GetDouble(attrs, "p"));
  PDIST_ASSIGN_OR_RETURN(bool is_test, ir::GetBool(attrs, "is_test"));
  PDIST_ASSIGN_OR_RETURN(std::string mode, ir::GetString(attrs, "mode"));
  const bool upscale = mode == "upscale_in_train";
  if (is_test) return upscale ? 1.0 : 1.0 - p;
  if (upscale) return p >= 1.0 ? 0.0 : 1.0 / (1.0 - p);
  return 1.0;
}

absl::StatusOr<DropoutDrawPlan> PlanDropoutDraw(const KernelContext& ctx, std::optional<int64_t> seed_operand) {
  DropoutDrawPlan plan;
  PDIST_ASSIGN_OR_RETURN(plan.factor, DropoutFactor(ctx.attrs()));
  PDIST_ASSIGN_OR_RETURN(double p, ir::GetDouble(ctx.attrs(), "p"));
  PDIST_ASSIGN_OR_RETURN(bool is_test, ir::GetBool(ctx.attrs(), "is_test"));
  PDIST_ASSIGN_OR_RETURN(int64_t seed, ir::GetInt(ctx.attrs(), "seed"));
  if (seed_operand.has_value()) seed = *seed_operand;
  plan.key = StreamKey(static_cast<uint64_t>(seed), HashName("dropout"));
  // p = 1 gives 2^53, above every 53-bit draw: nothing is kept.
  plan.threshold = is_test ? 0 : static_cast<uint64_t>(p * 9007199254740992.0);
  const Shape& local = ctx.input(0)->shape();
  int64_t whole = ctx.input(0)->num_elements();
  if (ctx.attrs().count("global_shape")) {
    PDIST_ASSIGN_OR_RETURN(plan.global_shape, ir::GetIntList(ctx.attrs(), "global_shape"));
    PDIST_ASSIGN_OR_RETURN(plan.offsets, ir::GetIntList(ctx.attrs(), "offsets"));
    if (plan.global_shape.size() != local.size() || plan.offsets.size() != local.size()) {
      return absl::InvalidArgumentError(absl::StrCat("c_dropout: global_shape ", ir::ShapeToString(plan.global_shape),
                                                     " and offsets must have one entry per dim of ",
                                                     ir::ShapeToString(local)));
    }
    whole = 1;
    for (int64_t d : plan.global_shape) whole *= d;
  }
  plan.first = static_cast<uint64_t>(ctx.micro_batch() * whole);
  return plan;
}

}  // namespace pdist::exec
