// CPU kernels of count_nonfinite and update_loss_scaling (the rules are documented with the ops
// in ir/ops/loss_scaling.cc).
#include <cmath>

#include "executor/cpu/cpu_kernels.h"
#include "executor/dtype_dispatch.h"
#include "executor/kernel.h"
#include "executor/math/loss_scaling.h"
#include "ir/attribute.h"
#include "ir/status.h"

namespace pdist::exec::cpu {
namespace {

absl::Status CountNonfiniteKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  double count = 0;
  PDIST_DISPATCH_FLOAT(x.dtype(), T, {
    const T* p = x.data<T>();
    for (int64_t i = 0; i < x.num_elements(); ++i) count += std::isfinite(p[i]) ? 0 : 1;
  });
  ctx.SetOutput(0, TensorFromDoubles(ctx.output_type(0), {count}, ctx.allocator()));
  return absl::OkStatus();
}

// (found_inf, loss_scaling, good_steps, bad_steps, skipped_steps) → the same, updated by the
// rule the GPU runs too (executor/math/loss_scaling.h).
absl::Status UpdateLossScalingKernel(KernelContext& ctx) {
  math::LossScalingRule rule;
  PDIST_ASSIGN_OR_RETURN(rule.incr_every, ir::GetInt(ctx.attrs(), "incr_every_n_steps"));
  PDIST_ASSIGN_OR_RETURN(rule.decr_every, ir::GetInt(ctx.attrs(), "decr_every_n_nan_or_inf"));
  PDIST_ASSIGN_OR_RETURN(rule.incr_ratio, ir::GetDouble(ctx.attrs(), "incr_ratio"));
  PDIST_ASSIGN_OR_RETURN(rule.decr_ratio, ir::GetDouble(ctx.attrs(), "decr_ratio"));
  const math::LossScalingState s = math::UpdateLossScaling(
      {ctx.input(0)->At(0), ctx.input(1)->At(0), ctx.input(2)->At(0), ctx.input(3)->At(0), ctx.input(4)->At(0)}, rule);
  const double values[] = {s.found_inf, s.scale, s.good_steps, s.bad_steps, s.skipped_steps};
  for (size_t r = 0; r < 5; ++r) ctx.SetOutput(r, TensorFromDoubles(ctx.output_type(r), {values[r]}, ctx.allocator()));
  return absl::OkStatus();
}

}  // namespace

void RegisterLossScalingKernels(KernelRegistry& registry) {
  registry.Register(DeviceType::kCPU, "count_nonfinite", CountNonfiniteKernel);
  registry.Register(DeviceType::kCPU, "update_loss_scaling", UpdateLossScalingKernel);
}

}  // namespace pdist::exec::cpu
