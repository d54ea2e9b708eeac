// Host side of the CUDA layer_norm, rms_norm and their gradients (device side: norm_launch.cu).
#include "executor/cuda/cuda_backend.h"
#include "executor/cuda/cuda_kernels.h"
#include "executor/cuda/cuda_status.h"
#include "executor/cuda/elem_type.h"
#include "executor/cuda/launch.h"
#include "executor/kernel.h"
#include "executor/shape_layout.h"
#include "ir/status.h"

namespace pdist::exec::cuda {
namespace {

const void* RawOrNull(const Tensor* t) { return t != nullptr && t->defined() ? t->raw() : nullptr; }

// The storage type of layer_norm's scale and bias (one type: ir/ops/norm.cc): x's, or f32 beside
// a bf16/f16 x; x's when it has neither.
absl::StatusOr<ElemType> ParamTypeOf(const KernelContext& ctx, const char* op, ElemType x_type) {
  for (size_t i : {1, 2}) {
    if (RawOrNull(ctx.input(i)) != nullptr) return ElemTypeOf(op, ctx.input(i)->dtype());
  }
  return x_type;
}

// The parameter gradients' partial sums (executor/cuda/column_split.h), in the type the math of
// an x of `dtype` runs in; kept with the kernel's submitted work.
void* ColumnSumsWorkspace(KernelContext& ctx, ir::DataType dtype, const RowsCols& rc) {
  const int64_t elements = SplitColumns(rc.rows, rc.cols).WorkspaceElements(rc.cols);
  return elements > 0 ? ctx.Scratch({{elements}, ir::ComputeDtype(dtype)}).raw() : nullptr;
}

// (x, scale?, bias?) → out, mean, variance.
absl::Status LayerNormKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  PDIST_ASSIGN_OR_RETURN(ElemType type, ElemTypeOf("layer_norm", x.dtype()));
  PDIST_ASSIGN_OR_RETURN(ElemType param_type, ParamTypeOf(ctx, "layer_norm", type));
  PDIST_ASSIGN_OR_RETURN(RowsCols rc, NormRowsCols(ctx, x.shape()));
  PDIST_ASSIGN_OR_RETURN(double eps, ir::GetDouble(ctx.attrs(), "epsilon"));
  Tensor& out = ctx.AllocateOutput(0);
  Tensor& mean = ctx.AllocateOutput(1);
  Tensor& variance = ctx.AllocateOutput(2);
  return CudaStatus(LaunchLayerNorm(type, param_type, x.raw(), RawOrNull(ctx.input(1)), RawOrNull(ctx.input(2)),
                                    out.raw(), mean.raw(), variance.raw(), rc.rows, rc.cols, eps, StreamOf(ctx)),
                    "layer_norm");
}

// (x, scale?, bias?, mean, variance, out_grad) → x_grad, scale_grad, bias_grad (the last two
// computed when their parameter is there, as on the CPU).
absl::Status LayerNormGradKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  PDIST_ASSIGN_OR_RETURN(ElemType type, ElemTypeOf("layer_norm_grad", x.dtype()));
  PDIST_ASSIGN_OR_RETURN(ElemType param_type, ParamTypeOf(ctx, "layer_norm_grad", type));
  PDIST_ASSIGN_OR_RETURN(RowsCols rc, NormRowsCols(ctx, x.shape()));
  PDIST_ASSIGN_OR_RETURN(double eps, ir::GetDouble(ctx.attrs(), "epsilon"));
  Tensor& x_grad = ctx.AllocateOutput(0);
  Tensor& scale_grad = ctx.AllocateOutput(1);
  Tensor& bias_grad = ctx.AllocateOutput(2);
  const bool parameters = ctx.input(1) != nullptr || ctx.input(2) != nullptr;
  void* workspace = parameters ? ColumnSumsWorkspace(ctx, x.dtype(), rc) : nullptr;
  return CudaStatus(LaunchLayerNormGrad(type, param_type, x.raw(), RawOrNull(ctx.input(1)), ctx.input(3)->raw(),
                                        ctx.input(4)->raw(), ctx.input(5)->raw(), x_grad.raw(),
                                        ctx.input(1) != nullptr ? scale_grad.raw() : nullptr,
                                        ctx.input(2) != nullptr ? bias_grad.raw() : nullptr, rc.rows, rc.cols, eps,
                                        workspace, StreamOf(ctx)),
                    "layer_norm_grad");
}

// (x, scale) → out, invvar.
absl::Status RmsNormKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  PDIST_ASSIGN_OR_RETURN(ElemType type, ElemTypeOf("rms_norm", x.dtype()));
  PDIST_ASSIGN_OR_RETURN(ElemType param_type, ElemTypeOf("rms_norm", ctx.input(1)->dtype()));
  PDIST_ASSIGN_OR_RETURN(RowsCols rc, NormRowsCols(ctx, x.shape()));
  PDIST_ASSIGN_OR_RETURN(double eps, ir::GetDouble(ctx.attrs(), "epsilon"));
  Tensor& out = ctx.AllocateOutput(0);
  Tensor& invvar = ctx.AllocateOutput(1);
  return CudaStatus(LaunchRmsNorm(type, param_type, x.raw(), ctx.input(1)->raw(), out.raw(), invvar.raw(), rc.rows,
                                  rc.cols, eps, StreamOf(ctx)),
                    "rms_norm");
}

// (x, scale, invvar, out_grad) → x_grad, scale_grad.
absl::Status RmsNormGradKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  PDIST_ASSIGN_OR_RETURN(ElemType type, ElemTypeOf("rms_norm_grad", x.dtype()));
  PDIST_ASSIGN_OR_RETURN(ElemType param_type, ElemTypeOf("rms_norm_grad", ctx.input(1)->dtype()));
  PDIST_ASSIGN_OR_RETURN(RowsCols rc, NormRowsCols(ctx, x.shape()));
  Tensor& x_grad = ctx.AllocateOutput(0);
  Tensor& scale_grad = ctx.AllocateOutput(1);
  return CudaStatus(LaunchRmsNormGrad(type, param_type, x.raw(), ctx.input(1)->raw(), ctx.input(2)->raw(),
                                      ctx.input(3)->raw(), x_grad.raw(), scale_grad.raw(), rc.rows, rc.cols,
                                      ColumnSumsWorkspace(ctx, x.dtype(), rc), StreamOf(ctx)),
                    "rms_norm_grad");
}

}  // namespace

void RegisterNormKernels(KernelRegistry& registry) {
  registry.Register(DeviceType::kCUDA, "layer_norm", LayerNormKernel);
  registry.Register(DeviceType::kCUDA, "layer_norm_grad", LayerNormGradKernel);
  registry.Register(DeviceType::kCUDA, "rms_norm", RmsNormKernel);
  registry.Register(DeviceType::kCUDA, "rms_norm_grad", RmsNormGradKernel);
}

}  // namespace pdist::exec::cuda
