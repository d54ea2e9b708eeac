// Host side of the CUDA softmax, log_softmax, cross_entropy_with_softmax and their gradients
// (device side: softmax_launch.cu). Hard labels are read on the host to be checked (named when
// out of range, as on the CPU).
#include "executor/backend.h"
#include "executor/cuda/cuda_backend.h"
#include "executor/cuda/cuda_kernels.h"
#include "executor/cuda/cuda_status.h"
#include "executor/cuda/elem_type.h"
#include "executor/cuda/launch.h"
#include "executor/kernel.h"
#include "executor/label_check.h"
#include "executor/shape_layout.h"
#include "ir/status.h"

namespace pdist::exec::cuda {
namespace {

absl::StatusOr<Lanes> LanesAround(const KernelContext& ctx, const ir::Shape& shape) {
  PDIST_ASSIGN_OR_RETURN(int64_t axis, ir::GetInt(ctx.attrs(), "axis"));
  if (axis < 0) axis += static_cast<int64_t>(shape.size());
  const AxisView v = MakeAxisView(shape, axis);
  return Lanes{v.outer, v.n, v.inner};
}

absl::Status SoftmaxKernel(KernelContext& ctx, bool log) {
  const Tensor& x = *ctx.input(0);
  PDIST_ASSIGN_OR_RETURN(ElemType type, ElemTypeOf(ctx.op().type().c_str(), x.dtype()));
  PDIST_ASSIGN_OR_RETURN(Lanes lanes, LanesAround(ctx, x.shape()));
  Tensor& out = ctx.AllocateOutput(0);
  return CudaStatus(LaunchSoftmax(type, x.raw(), out.raw(), lanes, log, StreamOf(ctx)), ctx.op().type().c_str());
}

absl::Status SoftmaxGradKernel(KernelContext& ctx, bool log) {
  const Tensor& out = *ctx.input(0);
  PDIST_ASSIGN_OR_RETURN(ElemType type, ElemTypeOf(ctx.op().type().c_str(), out.dtype()));
  PDIST_ASSIGN_OR_RETURN(Lanes lanes, LanesAround(ctx, out.shape()));
  Tensor& x_grad = ctx.AllocateOutput(0);
  return CudaStatus(LaunchSoftmaxGrad(type, out.raw(), ctx.input(1)->raw(), x_grad.raw(), lanes, log, StreamOf(ctx)),
                    ctx.op().type().c_str());
}

// The form of a cross entropy op; hard labels checked on the host.
absl::StatusOr<CrossEntropyForm> FormOf(const KernelContext& ctx, const Tensor& label, const Lanes& lanes) {
  CrossEntropyForm form;
  PDIST_ASSIGN_OR_RETURN(form.soft_label, ir::GetBool(ctx.attrs(), "soft_label"));
  PDIST_ASSIGN_OR_RETURN(form.use_softmax, ir::GetBool(ctx.attrs(), "use_softmax"));
  PDIST_ASSIGN_OR_RETURN(form.ignore_index, ir::GetInt(ctx.attrs(), "ignore_index"));
  form.label_64 = label.dtype() == ir::DataType::kInt64;
  if (!form.soft_label) {
    PDIST_ASSIGN_OR_RETURN(Tensor host, ToDevice(label, Device::Cpu()));
    PDIST_RETURN_IF_ERROR(CheckLabels(host, lanes.n, form.ignore_index));
  }
  return form;
}

// (logits, label) → softmax, loss.
absl::Status CrossEntropyKernel(KernelContext& ctx) {
  const Tensor& logits = *ctx.input(0);
  const Tensor& label = *ctx.input(1);
  PDIST_ASSIGN_OR_RETURN(ElemType type, ElemTypeOf("cross_entropy_with_softmax", logits.dtype()));
  PDIST_ASSIGN_OR_RETURN(Lanes lanes, LanesAround(ctx, logits.shape()));
  PDIST_ASSIGN_OR_RETURN(CrossEntropyForm form, FormOf(ctx, label, lanes));
  Tensor& softmax = ctx.AllocateOutput(0);
  Tensor& loss = ctx.AllocateOutput(1);
  // Without return_softmax the result is an empty f[0]: the kernel writes no softmax.
  void* softmax_out = softmax.num_elements() == logits.num_elements() ? softmax.raw() : nullptr;
  return CudaStatus(
      LaunchCrossEntropy(type, logits.raw(), label.raw(), softmax_out, loss.raw(), lanes, form, StreamOf(ctx)),
      "cross_entropy_with_softmax");
}

// (label, softmax, loss_grad) → logits_grad; `from_logits`: (label, logits, loss_grad), the
// softmax recomputed per lane.
absl::Status CrossEntropyGradKernel(KernelContext& ctx, bool from_logits) {
  const Tensor& label = *ctx.input(0);
  const Tensor& softmax = *ctx.input(1);
  const char* name = ctx.op().type().c_str();
  PDIST_ASSIGN_OR_RETURN(ElemType type, ElemTypeOf(name, softmax.dtype()));
  PDIST_ASSIGN_OR_RETURN(Lanes lanes, LanesAround(ctx, softmax.shape()));
  PDIST_ASSIGN_OR_RETURN(CrossEntropyForm form, FormOf(ctx, label, lanes));
  Tensor& logits_grad = ctx.AllocateOutput(0);
  return CudaStatus(LaunchCrossEntropyGrad(type, label.raw(), softmax.raw(), ctx.input(2)->raw(), logits_grad.raw(),
                                           lanes, form, from_logits, StreamOf(ctx)),
                    name);
}

}  // namespace

void RegisterSoftmaxKernels(KernelRegistry& registry) {
  registry.Register(DeviceType::kCUDA, "softmax", [](KernelContext& ctx) { return SoftmaxKernel(ctx, false); });
  registry.Register(DeviceType::kCUDA, "log_softmax", [](KernelContext& ctx) { return SoftmaxKernel(ctx, true); });
  registry.Register(DeviceType::kCUDA, "softmax_grad", [](KernelContext& ctx) { return SoftmaxGradKernel(ctx, false); });
  registry.Register(DeviceType::kCUDA, "log_softmax_grad", [](KernelContext& ctx) { return SoftmaxGradKernel(ctx, true); });
  registry.Register(DeviceType::kCUDA, "cross_entropy_with_softmax", CrossEntropyKernel);
  registry.Register(DeviceType::kCUDA, "cross_entropy_with_softmax_grad",
                    [](KernelContext& ctx) { return CrossEntropyGradKernel(ctx, false); });
  registry.Register(DeviceType::kCUDA, "cross_entropy_with_softmax_grad_from_logits",
                    [](KernelContext& ctx) { return CrossEntropyGradKernel(ctx, true); });
}

}  // namespace pdist::exec::cuda
