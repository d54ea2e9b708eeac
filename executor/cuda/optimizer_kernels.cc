// Host side of the CUDA adamw, sgd and momentum (device side: optimizer_launch.cu). The
// learning rate, the beta powers and skip_update stay on the device: the kernel reads them, so a
// step never waits for the host.
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

// The gradient's element type: the parameter's, or bf16/f16 for an f32 parameter (a master
// weight updated from its low-precision gradient).
absl::StatusOr<ElemType> GradTypeOf(const KernelContext& ctx, const Tensor& param, const Tensor& grad) {
  const bool mixed = param.dtype() == ir::DataType::kFloat32 &&
                     ir::IsLowPrecisionFloat(grad.dtype());
  if (grad.dtype() != param.dtype() && !mixed) {
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type(), ": gradient ", ir::DataTypeName(grad.dtype()),
                                                   " for a ", ir::DataTypeName(param.dtype()),
                                                   " parameter; expected the same dtype, or bf16/f16 for f32"));
  }
  return ElemTypeOf(ctx.op().type().c_str(), grad.dtype());
}

// Operand `input` (one element on the device; absent: a null reference) of `ctx`'s op.
absl::StatusOr<ScalarRef> ScalarOf(const KernelContext& ctx, size_t input, const char* name) {
  const Tensor* t = ctx.input(input);
  if (t == nullptr) return ScalarRef{};
  PDIST_ASSIGN_OR_RETURN(ElemType type, ElemTypeOf(absl::StrCat(ctx.op().type(), "'s ", name).c_str(), t->dtype()));
  return ScalarRef{t->raw(), type};
}

// (param, learning_rate, grad, skip_update?) → param_out.
absl::Status SgdKernel(KernelContext& ctx) {
  const Tensor& param = *ctx.input(0);
  PDIST_ASSIGN_OR_RETURN(ElemType type, ElemTypeOf("sgd", param.dtype()));
  PDIST_ASSIGN_OR_RETURN(ElemType grad_type, GradTypeOf(ctx, param, *ctx.input(2)));
  PDIST_ASSIGN_OR_RETURN(ScalarRef lr, ScalarOf(ctx, 1, "learning_rate"));
  PDIST_ASSIGN_OR_RETURN(ScalarRef skip, ScalarOf(ctx, 3, "skip_update"));
  Tensor& param_out = ctx.AllocateOutput(0);
  return CudaStatus(LaunchSgd(type, grad_type, param.raw(), ctx.input(2)->raw(), lr, skip, param_out.raw(), param.num_elements(),
                              StreamOf(ctx)),
                    "sgd");
}

// (param, grad, velocity, learning_rate, skip_update?) → param_out, velocity_out.
absl::Status MomentumKernel(KernelContext& ctx) {
  const Tensor& param = *ctx.input(0);
  PDIST_ASSIGN_OR_RETURN(ElemType type, ElemTypeOf("momentum", param.dtype()));
  PDIST_ASSIGN_OR_RETURN(ElemType grad_type, GradTypeOf(ctx, param, *ctx.input(1)));
  MomentumConfig config;
  PDIST_ASSIGN_OR_RETURN(config.mu, ir::GetDouble(ctx.attrs(), "mu"));
  PDIST_ASSIGN_OR_RETURN(config.nesterov, ir::GetBool(ctx.attrs(), "use_nesterov"));
  PDIST_ASSIGN_OR_RETURN(config.regularization_coeff, ir::GetDouble(ctx.attrs(), "regularization_coeff"));
  PDIST_ASSIGN_OR_RETURN(ScalarRef lr, ScalarOf(ctx, 3, "learning_rate"));
  PDIST_ASSIGN_OR_RETURN(ScalarRef skip, ScalarOf(ctx, 4, "skip_update"));
  Tensor& param_out = ctx.AllocateOutput(0);
  Tensor& velocity_out = ctx.AllocateOutput(1);
  return CudaStatus(LaunchMomentum(type, grad_type, param.raw(), ctx.input(1)->raw(), ctx.input(2)->raw(), lr, skip,
                                   param_out.raw(), velocity_out.raw(), param.num_elements(), config, StreamOf(ctx)),
                    "momentum");
}

// (param, grad, learning_rate, moment1, moment2, beta1_pow, beta2_pow, skip_update?)
//   → param_out, moment1_out, moment2_out, beta1_pow_out, beta2_pow_out.
absl::Status AdamWKernel(KernelContext& ctx) {
  const Tensor& param = *ctx.input(0);
  PDIST_ASSIGN_OR_RETURN(ElemType type, ElemTypeOf("adamw", param.dtype()));
  PDIST_ASSIGN_OR_RETURN(ElemType grad_type, GradTypeOf(ctx, param, *ctx.input(1)));
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
  return CudaStatus(LaunchAdamW(type, grad_type, param.raw(), ctx.input(1)->raw(), lr, ctx.input(3)->raw(), ctx.input(4)->raw(),
                                beta1_pow, beta2_pow, skip, param_out.raw(), moment1_out.raw(), moment2_out.raw(),
                                beta1_pow_out.raw(), beta2_pow_out.raw(), pow_type, param.num_elements(), config,
                                StreamOf(ctx)),
                    "adamw");
}

}  // namespace

void RegisterOptimizerKernels(KernelRegistry& registry) {
  registry.Register(DeviceType::kCUDA, "adamw", AdamWKernel);
  registry.Register(DeviceType::kCUDA, "sgd", SgdKernel);
  registry.Register(DeviceType::kCUDA, "momentum", MomentumKernel);
}

}  // namespace pdist::exec::cuda
