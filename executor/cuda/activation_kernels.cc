// Host side of the CUDA activation kernels and scale (device side: activation_launch.cu).
#include <string>

#include "executor/cuda/cuda_backend.h"
#include "executor/cuda/cuda_kernels.h"
#include "executor/cuda/cuda_status.h"
#include "executor/cuda/elem_type.h"
#include "executor/cuda/launch.h"
#include "executor/kernel.h"
#include "ir/status.h"

namespace pdist::exec::cuda {
namespace {

absl::Status Forward(KernelContext& ctx, UnaryOp op) {
  const Tensor& x = *ctx.input(0);
  PDIST_ASSIGN_OR_RETURN(ElemType type, ElemTypeOf(ctx.op().type().c_str(), x.dtype()));
  Tensor& out = ctx.AllocateOutput(0);
  return CudaStatus(LaunchUnary(op, type, x.raw(), out.raw(), x.num_elements(), StreamOf(ctx)), ctx.op().type().c_str());
}

absl::Status Backward(KernelContext& ctx, UnaryOp op) {
  const Tensor& saved = *ctx.input(0);
  const Tensor& out_grad = *ctx.input(1);
  PDIST_ASSIGN_OR_RETURN(ElemType type, ElemTypeOf(ctx.op().type().c_str(), saved.dtype()));
  Tensor& x_grad = ctx.AllocateOutput(0);
  return CudaStatus(LaunchUnaryGrad(op, type, saved.raw(), out_grad.raw(), x_grad.raw(), saved.num_elements(),
                                    StreamOf(ctx)),
                    ctx.op().type().c_str());
}

// gelu and gelu_grad pick the erf or the tanh form from the `approximate` attribute.
absl::StatusOr<UnaryOp> GeluForm(const KernelContext& ctx) {
  PDIST_ASSIGN_OR_RETURN(bool approximate, ir::GetBool(ctx.attrs(), "approximate"));
  return approximate ? UnaryOp::kGeluTanh : UnaryOp::kGeluErf;
}

absl::Status Scale(KernelContext& ctx) {
  PDIST_ASSIGN_OR_RETURN(double scale, ir::GetDouble(ctx.attrs(), "scale"));
  PDIST_ASSIGN_OR_RETURN(double bias, ir::GetDouble(ctx.attrs(), "bias"));
  PDIST_ASSIGN_OR_RETURN(bool bias_after_scale, ir::GetBool(ctx.attrs(), "bias_after_scale"));
  const Tensor& x = *ctx.input(0);
  PDIST_ASSIGN_OR_RETURN(ElemType type, ElemTypeOf("scale", x.dtype()));
  Tensor& out = ctx.AllocateOutput(0);
  return CudaStatus(
      LaunchScale(type, x.raw(), out.raw(), x.num_elements(), scale, bias, bias_after_scale, StreamOf(ctx)), "scale");
}

// Between the floating dtypes (bf16 ↔ f32 under mixed precision); the CPU's cast also takes
// integers, which no GPU program casts today.
absl::Status Cast(KernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  PDIST_ASSIGN_OR_RETURN(ElemType from, ElemTypeOf("cast", x.dtype()));
  PDIST_ASSIGN_OR_RETURN(ElemType to, ElemTypeOf("cast", ctx.output_type(0).dtype));
  Tensor& out = ctx.AllocateOutput(0);
  return CudaStatus(LaunchCast(from, to, x.raw(), out.raw(), x.num_elements(), StreamOf(ctx)), "cast");
}

void RegisterActivation(KernelRegistry& registry, const std::string& name, UnaryOp op) {
  registry.Register(DeviceType::kCUDA, name, [op](KernelContext& ctx) { return Forward(ctx, op); });
  registry.Register(DeviceType::kCUDA, name + "_grad", [op](KernelContext& ctx) { return Backward(ctx, op); });
}

}  // namespace

void RegisterActivationKernels(KernelRegistry& registry) {
  registry.Register(DeviceType::kCUDA, "scale", Scale);
  registry.Register(DeviceType::kCUDA, "cast", Cast);
  RegisterActivation(registry, "relu", UnaryOp::kRelu);
  registry.Register(DeviceType::kCUDA, "gelu", [](KernelContext& ctx) -> absl::Status {
    PDIST_ASSIGN_OR_RETURN(UnaryOp op, GeluForm(ctx));
    return Forward(ctx, op);
  });
  registry.Register(DeviceType::kCUDA, "gelu_grad", [](KernelContext& ctx) -> absl::Status {
    PDIST_ASSIGN_OR_RETURN(UnaryOp op, GeluForm(ctx));
    return Backward(ctx, op);
  });
  RegisterActivation(registry, "silu", UnaryOp::kSilu);
  RegisterActivation(registry, "tanh", UnaryOp::kTanh);
  RegisterActivation(registry, "exp", UnaryOp::kExp);
  RegisterActivation(registry, "sigmoid", UnaryOp::kSigmoid);
  RegisterActivation(registry, "erf", UnaryOp::kErf);
  RegisterActivation(registry, "sqrt", UnaryOp::kSqrt);
  RegisterActivation(registry, "rsqrt", UnaryOp::kRsqrt);
}

}  // namespace pdist::exec::cuda
