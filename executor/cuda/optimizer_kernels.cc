// Host side of the CUDA adamw (device side: optimizer_launch.cu). The learning rate, the beta
// powers and skip_update stay on the device: the kernel reads them, so a step never waits for
// the host.
#include "absl/strings/str_cat.h"
#include "executor/cuda/cuda_backend.h"
#include "executor/cuda/cuda_kernels.h"
#include "executor/cuda/cuda_status.h"
#include "executor/cuda/elem_type.h"
#include "executor/cuda/launch.h"
#include "executor/kernel.h"
#include "ir/status.h"

namespace pdist::exec::cuda {
namespace {

absl::StatusOr<ScalarRef> ScalarOf(const KernelContext& ctx, size_t input, const char* name) {
  const Tensor* t = ctx.input(input);
  if (t == nullptr) return ScalarRef{};
  PDIST_ASSIGN_OR_RETURN(ElemType type, ElemTypeOf(absl::StrCat("adamw's ", name).c_str(), t->dtype()));
  return ScalarRef{t->raw(), type};
}

// (param, grad, learning_rate, moment1, moment2, beta1_pow, beta2_pow, skip_update?)
//   → param_out, moment1_out, moment2_out, beta1_pow_out, beta2_pow_out.
absl::Status AdamWKernel(KernelContext& ctx) {
  const Tensor& param = *ctx.input(0);
  PDIST_ASSIGN_OR_RETURN(ElemType type, ElemTypeOf("adamw", param.dtype()));
  AdamWConfig config;
  PDIST_ASSIGN_OR_RETURN(config.beta1, ir::GetDouble(ctx.attrs(), "beta1"));
  PDIST_ASSIGN_OR_RETURN(config.beta2, ir::GetDouble(ctx.attrs(), "beta2"));
  PDIST_ASSIGN_OR_RETURN(config.epsilon, ir::GetDouble(ctx.attrs(), "epsilon"));
  PDIST_ASSIGN_OR_RETURN(config.lr_ratio, ir::GetDouble(ctx.attrs(), "lr_ratio"));
  PDIST_ASSIGN_OR_RETURN(config.coeff, ir::GetDouble(ctx.attrs(), "coeff"));
  PDIST_ASSIGN_OR_RETURN(config.with_decay, ir::GetBool(ctx.attrs(), "with_decay"));
  PDIST_ASSIGN_OR_RETURN(ScalarRef lr, ScalarOf(ctx, 2, "learning_rate"));
  PDIST_ASSIGN_OR_RETURN(ScalarRef beta1_pow, ScalarOf(ctx, 5, "beta1_pow"));
  PDIST_ASSIGN_OR_RETURN(ScalarRef beta2_pow, ScalarOf(ctx, 6, "beta2_pow"));
  PDIST_ASSIGN_OR_RETURN(ScalarRef skip, ScalarOf(ctx, 7, "skip_update"));
  Tensor& param_out = ctx.AllocateOutput(0);
  Tensor& moment1_out = ctx.AllocateOutput(1);
  Tensor& moment2_out = ctx.AllocateOutput(2);
  Tensor& beta1_pow_out = ctx.AllocateOutput(3);
  Tensor& beta2_pow_out = ctx.AllocateOutput(4);
  PDIST_ASSIGN_OR_RETURN(ElemType pow_type, ElemTypeOf("adamw's beta1_pow_out", beta1_pow_out.dtype()));
  return CudaStatus(LaunchAdamW(type, param.raw(), ctx.input(1)->raw(), lr, ctx.input(3)->raw(), ctx.input(4)->raw(),
                                beta1_pow, beta2_pow, skip, param_out.raw(), moment1_out.raw(), moment2_out.raw(),
                                beta1_pow_out.raw(), beta2_pow_out.raw(), pow_type, param.num_elements(), config,
                                StreamOf(ctx)),
                    "adamw");
}

}  // namespace

void RegisterOptimizerKernels(KernelRegistry& registry) { registry.Register(DeviceType::kCUDA, "adamw", AdamWKernel); }

}  // namespace pdist::exec::cuda
