// CPU kernels of count_nonfinite and update_loss_scaling (the rules are documented with the ops
// in ir/ops/loss_scaling.cc).
#include <cmath>

#include "executor/cpu/cpu_kernels.h"
#include "executor/dtype_dispatch.h"
#include "executor/kernel.h"
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

// (found_inf, loss_scaling, good_steps, bad_steps, skipped_steps) → the same, updated.
absl::Status UpdateLossScalingKernel(KernelContext& ctx) {
  PDIST_ASSIGN_OR_RETURN(int64_t incr_every, ir::GetInt(ctx.attrs(), "incr_every_n_steps"));
  PDIST_ASSIGN_OR_RETURN(int64_t decr_every, ir::GetInt(ctx.attrs(), "decr_every_n_nan_or_inf"));
  PDIST_ASSIGN_OR_RETURN(double incr_ratio, ir::GetDouble(ctx.attrs(), "incr_ratio"));
  PDIST_ASSIGN_OR_RETURN(double decr_ratio, ir::GetDouble(ctx.attrs(), "decr_ratio"));
  const double found = ctx.input(0)->At(0);
  double scale = ctx.input(1)->At(0);
  double good = ctx.input(2)->At(0);
  double bad = ctx.input(3)->At(0);
  double skipped = ctx.input(4)->At(0);
  if (found > 0) {
    good = 0;
    skipped += 1;
    if (++bad == static_cast<double>(decr_every)) {
      scale = std::max(scale * decr_ratio, 1.0);
      bad = 0;
    }
  } else {
    bad = 0;
    if (++good == static_cast<double>(incr_every)) {
      // f32 holds the scale: a product past its range would be inf, so keep the old one.
      const float grown = static_cast<float>(scale * incr_ratio);
      if (std::isfinite(grown)) scale = grown;
      good = 0;
    }
  }
  const double values[] = {found, scale, good, bad, skipped};
  for (size_t r = 0; r < 5; ++r) ctx.SetOutput(r, TensorFromDoubles(ctx.output_type(r), {values[r]}, ctx.allocator()));
  return absl::OkStatus();
}

}  // namespace

void RegisterLossScalingKernels(KernelRegistry& registry) {
  registry.Register(DeviceType::kCPU, "count_nonfinite", CountNonfiniteKernel);
  registry.Register(DeviceType::kCPU, "update_loss_scaling", UpdateLossScalingKernel);
}

}  // namespace pdist::exec::cpu
