// Host side of the CUDA elementwise kernels: broadcast arithmetic and its gradients, dropout and
// its gradient. Shapes become strided walks (executor/cuda/launch.h), launched on the kernel's
// stream; the math is the CPU's (executor/math/arithmetic.h, executor/random.h).
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "executor/backend.h"
#include "executor/cuda/cuda_backend.h"
#include "executor/cuda/cuda_kernels.h"
#include "executor/cuda/cuda_status.h"
#include "executor/cuda/elem_type.h"
#include "executor/cuda/launch.h"
#include "executor/cuda/strided_walk.h"
#include "executor/dropout_draw.h"
#include "executor/kernel.h"
#include "executor/strides.h"
#include "ir/status.h"

namespace pdist::exec::cuda {
namespace {

template <BinaryOp kOp>
absl::Status BinaryKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  const Tensor& y = *ctx.input(1);
  const char* name = ctx.op().type().c_str();
  PDIST_ASSIGN_OR_RETURN(ElemType type, ElemTypeOf(name, x.dtype()));
  Tensor& out = ctx.AllocateOutput(0);
  const Shape& shape = out.shape();
  PDIST_RETURN_IF_ERROR(CheckBroadcastsTo(name, shape, {&x.shape(), &y.shape()}));
  PDIST_ASSIGN_OR_RETURN(StridedIndex<2> index,
                         Walk<2>(name, shape, {BroadcastStrides(x.shape(), shape), BroadcastStrides(y.shape(), shape)}));
  return CudaStatus(LaunchBinary(kOp, type, x.raw(), y.raw(), out.raw(), out.num_elements(), index, StreamOf(ctx)),
                    name);
}

// x_grad and y_grad: each sums d(op)(x, y, g) over the dims it was broadcast along. add_grad and
// subtract_grad get no x and y (ir::OpDef::type_only_operands; their derivatives do not read
// them): g, of the broadcast shape, stands in, and the outputs' types give the shapes. A
// gradient that is g itself (an operand of add that was not broadcast) is g's tensor, not a copy
// (KernelContext::AliasOperand): the residual adds' and the bias adds' copies are gone.
template <BinaryOp kOp>
absl::Status BinaryGradKernel(KernelContext& ctx) {
  const Tensor& g = *ctx.input(2);
  const Tensor& x = ctx.input(0) != nullptr ? *ctx.input(0) : g;
  const Tensor& y = ctx.input(1) != nullptr ? *ctx.input(1) : g;
  const char* name = ctx.op().type().c_str();
  PDIST_ASSIGN_OR_RETURN(ElemType type, ElemTypeOf(name, g.dtype()));
  const Shape& out_shape = g.shape();
  const size_t rank = out_shape.size();
  const std::array<std::vector<int64_t>, 3> strides = {BroadcastStrides(x.shape(), out_shape),
                                                       BroadcastStrides(y.shape(), out_shape), Strides(out_shape)};
  for (int operand = 0; operand < 2; ++operand) {
    if (ctx.AliasOperand(static_cast<size_t>(operand))) continue;
    Tensor& grad = ctx.AllocateOutput(static_cast<size_t>(operand));
    const std::vector<int64_t> own = BroadcastStrides(grad.shape(), out_shape);
    // grad's walk: out's dims where the operand is not broadcast (size 1 elsewhere); the summed
    // walk: the dims where it is.
    std::vector<int64_t> kept(rank, 1), summed(rank, 1);
    for (size_t d = 0; d < rank; ++d) (own[d] == 0 && out_shape[d] != 1 ? summed : kept)[d] = out_shape[d];
    std::vector<int64_t> kept_dims, summed_dims;
    std::array<std::vector<int64_t>, 3> kept_strides, summed_strides;
    for (size_t d = 0; d < rank; ++d) {
      if (kept[d] != 1) {
        kept_dims.push_back(kept[d]);
        for (int k = 0; k < 3; ++k) kept_strides[k].push_back(strides[k][d]);
      }
      if (summed[d] != 1) {
        summed_dims.push_back(summed[d]);
        for (int k = 0; k < 3; ++k) summed_strides[k].push_back(strides[k][d]);
      }
    }
    PDIST_ASSIGN_OR_RETURN(StridedIndex<3> grad_index, Walk<3>(name, kept_dims, kept_strides));
    PDIST_ASSIGN_OR_RETURN(StridedIndex<3> reduced, Walk<3>(name, summed_dims, summed_strides));
    void* workspace = nullptr;
    int64_t terms = 1;
    for (int64_t n : summed_dims) terms *= n;
    if (SumsByColumns(terms, grad.num_elements())) {
      const int64_t elements = SplitColumns(terms, grad.num_elements()).WorkspaceElements(grad.num_elements());
      workspace = ctx.Scratch({{elements}, ir::ComputeDtype(g.dtype())}).raw();
    }
    PDIST_RETURN_IF_ERROR(CudaStatus(LaunchBinaryGrad(kOp, operand, type, x.raw(), y.raw(), g.raw(), grad.raw(),
                                                      grad.num_elements(), grad_index, reduced, workspace,
                                                      StreamOf(ctx)),
                                     name));
  }
  return absl::OkStatus();
}

absl::Status DropoutKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  PDIST_ASSIGN_OR_RETURN(ElemType type, ElemTypeOf("dropout", x.dtype()));
  std::optional<int64_t> seed_operand;
  if (const Tensor* seed = ctx.input(1)) {  // on the device: read its value on the host
    PDIST_ASSIGN_OR_RETURN(Tensor host, ToDevice(*seed, Device::Cpu()));
    seed_operand = host.dtype() == DataType::kInt64 ? host.data<int64_t>()[0] : host.data<int32_t>()[0];
  }
  PDIST_ASSIGN_OR_RETURN(DropoutDrawPlan plan, PlanDropoutDraw(ctx, seed_operand));
  DropoutDraw draw{.key = plan.key, .threshold = plan.threshold, .first = plan.first};
  if (!plan.global_shape.empty()) {
    // The piece's walk with the whole tensor's row-major strides; its first element's position.
    const Shape& local = x.shape();
    std::vector<int64_t> global_strides(local.size(), 1);
    for (size_t d = local.size(); d-- > 1;) global_strides[d - 1] = global_strides[d] * plan.global_shape[d];
    PDIST_ASSIGN_OR_RETURN(draw.global, Walk<1>("c_dropout", local, {global_strides}));
    draw.piece = true;
    for (size_t d = 0; d < local.size(); ++d) draw.offset += plan.offsets[d] * global_strides[d];
  }
  Tensor& out = ctx.AllocateOutput(0);
  Tensor& mask = ctx.AllocateOutput(1);
  return CudaStatus(LaunchDropout(type, x.raw(), out.raw(), mask.data<bool>(), x.num_elements(), plan.factor, draw,
                                  StreamOf(ctx)),
                    "dropout");
}

absl::Status DropoutGradKernel(KernelContext& ctx) {
  const Tensor& mask = *ctx.input(0);
  const Tensor& out_grad = *ctx.input(1);
  PDIST_ASSIGN_OR_RETURN(ElemType type, ElemTypeOf("dropout_grad", out_grad.dtype()));
  PDIST_ASSIGN_OR_RETURN(double factor, DropoutFactor(ctx.attrs()));
  Tensor& x_grad = ctx.AllocateOutput(0);
  return CudaStatus(LaunchDropoutGrad(type, mask.data<bool>(), out_grad.raw(), x_grad.raw(), out_grad.num_elements(),
                                      factor, StreamOf(ctx)),
                    "dropout_grad");
}

template <BinaryOp kOp>
void RegisterBinary(KernelRegistry& registry, const std::string& name) {
  registry.Register(DeviceType::kCUDA, name, BinaryKernel<kOp>);
  registry.Register(DeviceType::kCUDA, name + "_grad", BinaryGradKernel<kOp>);
}

}  // namespace

void RegisterElementwiseKernels(KernelRegistry& registry) {
  RegisterBinary<BinaryOp::kAdd>(registry, "add");
  RegisterBinary<BinaryOp::kSubtract>(registry, "subtract");
  RegisterBinary<BinaryOp::kMultiply>(registry, "multiply");
  RegisterBinary<BinaryOp::kDivide>(registry, "divide");
  RegisterBinary<BinaryOp::kMaximum>(registry, "maximum");
  registry.Register(DeviceType::kCUDA, "dropout", DropoutKernel);
  registry.Register(DeviceType::kCUDA, "c_dropout", DropoutKernel);
  registry.Register(DeviceType::kCUDA, "dropout_grad", DropoutGradKernel);
}

}  // namespace pdist::exec::cuda
