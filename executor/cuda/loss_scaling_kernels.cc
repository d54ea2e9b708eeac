// Host side of the CUDA count_nonfinite and update_loss_scaling (device side:
// loss_scaling_launch.cu). The scalars stay on the device: the step never waits for the host.
#include "executor/cuda/cuda_backend.h"
#include "executor/cuda/cuda_kernels.h"
#include "executor/cuda/cuda_status.h"
#include "executor/cuda/elem_type.h"
#include "executor/cuda/launch.h"
#include "executor/kernel.h"
#include "ir/status.h"

namespace pdist::exec::cuda {
namespace {

absl::Status CountNonfiniteKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  PDIST_ASSIGN_OR_RETURN(ElemType type, ElemTypeOf("count_nonfinite", x.dtype()));
  Tensor& out = ctx.AllocateOutput(0);
  PDIST_ASSIGN_OR_RETURN(ElemType out_type, ElemTypeOf("count_nonfinite's result", out.dtype()));
  Tensor scratch = Tensor::Empty({{1}, ir::DataType::kInt64}, ctx.allocator(), ctx.stream());
  return CudaStatus(LaunchCountNonfinite(type, x.raw(), x.num_elements(), out.raw(), out_type, scratch.raw(),
                                         StreamOf(ctx)),
                    "count_nonfinite");
}

// (found_inf, loss_scaling, good_steps, bad_steps, skipped_steps) → the same, updated.
absl::Status UpdateLossScalingKernel(KernelContext& ctx) {
  PDIST_ASSIGN_OR_RETURN(int64_t incr_every, ir::GetInt(ctx.attrs(), "incr_every_n_steps"));
  PDIST_ASSIGN_OR_RETURN(int64_t decr_every, ir::GetInt(ctx.attrs(), "decr_every_n_nan_or_inf"));
  PDIST_ASSIGN_OR_RETURN(double incr_ratio, ir::GetDouble(ctx.attrs(), "incr_ratio"));
  PDIST_ASSIGN_OR_RETURN(double decr_ratio, ir::GetDouble(ctx.attrs(), "decr_ratio"));
  LossScalingOperands o;
  for (size_t r = 0; r < 5; ++r) {
    const Tensor& in = *ctx.input(r);
    PDIST_ASSIGN_OR_RETURN(ElemType in_type, ElemTypeOf("update_loss_scaling", in.dtype()));
    Tensor& out = ctx.AllocateOutput(r);
    PDIST_ASSIGN_OR_RETURN(o.out_type[r], ElemTypeOf("update_loss_scaling", out.dtype()));
    o.in[r] = {in.raw(), in_type};
    o.out[r] = out.raw();
  }
  return CudaStatus(LaunchUpdateLossScaling(o, incr_every, decr_every, incr_ratio, decr_ratio, StreamOf(ctx)),
                    "update_loss_scaling");
}

}  // namespace

void RegisterLossScalingKernels(KernelRegistry& registry) {
  registry.Register(DeviceType::kCUDA, "count_nonfinite", CountNonfiniteKernel);
  registry.Register(DeviceType::kCUDA, "update_loss_scaling", UpdateLossScalingKernel);
}

}  // namespace pdist::exec::cuda
