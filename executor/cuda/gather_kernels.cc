// Host side of the CUDA gather and gather_grad (device side: gather_launch.cu). The indices are
// read on the host, as embedding's ids are: to name one out of range as the CPU does
// (executor/gather_rows.h), and to group the positions by source row for the gradient's
// deterministic sums (executor/embedding_rows.h).
#include <vector>

#include "executor/backend.h"
#include "executor/cuda/cuda_backend.h"
#include "executor/cuda/cuda_kernels.h"
#include "executor/cuda/cuda_status.h"
#include "executor/cuda/elem_type.h"
#include "executor/cuda/launch.h"
#include "executor/embedding_rows.h"
#include "executor/gather_rows.h"
#include "executor/kernel.h"
#include "ir/status.h"

namespace pdist::exec::cuda {
namespace {

// `values` as a device int64 tensor on the kernel's device.
absl::StatusOr<Tensor> Upload(const KernelContext& ctx, const std::vector<int64_t>& values) {
  return ToDevice(TensorFromDoubles({{static_cast<int64_t>(values.size())}, ir::DataType::kInt64},
                                    std::vector<double>(values.begin(), values.end())),
                  ctx.device());
}

// (x, index) → out.
absl::Status GatherKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  PDIST_ASSIGN_OR_RETURN(int64_t axis, ir::GetInt(ctx.attrs(), "axis"));
  PDIST_ASSIGN_OR_RETURN(Tensor index, ToDevice(*ctx.input(1), Device::Cpu()));
  PDIST_ASSIGN_OR_RETURN(GatherView v, GatherViewOf(x.shape(), axis, index, "gather"));
  PDIST_ASSIGN_OR_RETURN(Tensor rows, Upload(ctx, v.rows));
  Tensor& out = ctx.AllocateOutput(0);
  return CudaStatus(LaunchGather(static_cast<int>(ir::DataTypeSize(x.dtype())), x.raw(), rows.data<int64_t>(),
                                 out.raw(), v.outer, v.axis, static_cast<int64_t>(v.rows.size()), v.inner,
                                 StreamOf(ctx)),
                    "gather");
}

// (index, out_grad) → x_grad.
absl::Status GatherGradKernel(KernelContext& ctx) {
  const Tensor& out_grad = *ctx.input(1);
  PDIST_ASSIGN_OR_RETURN(ElemType type, ElemTypeOf("gather_grad", out_grad.dtype()));
  PDIST_ASSIGN_OR_RETURN(int64_t axis, ir::GetInt(ctx.attrs(), "axis"));
  Tensor& x_grad = ctx.AllocateOutput(0);
  PDIST_ASSIGN_OR_RETURN(Tensor index, ToDevice(*ctx.input(0), Device::Cpu()));
  PDIST_ASSIGN_OR_RETURN(GatherView v, GatherViewOf(x_grad.shape(), axis, index, "gather_grad"));
  const Tensor rows = TensorFromDoubles({{static_cast<int64_t>(v.rows.size())}, ir::DataType::kInt64},
                                        std::vector<double>(v.rows.begin(), v.rows.end()));
  const IdGroups groups = GroupIds(rows, v.axis);
  PDIST_ASSIGN_OR_RETURN(Tensor start, Upload(ctx, groups.start));
  PDIST_ASSIGN_OR_RETURN(Tensor order, Upload(ctx, groups.order));
  return CudaStatus(LaunchGatherGrad(type, start.data<int64_t>(), order.data<int64_t>(), out_grad.raw(), x_grad.raw(),
                                     v.outer, v.axis, static_cast<int64_t>(v.rows.size()), v.inner, StreamOf(ctx)),
                    "gather_grad");
}

}  // namespace

void RegisterGatherKernels(KernelRegistry& registry) {
  registry.Register(DeviceType::kCUDA, "gather", GatherKernel);
  registry.Register(DeviceType::kCUDA, "gather_grad", GatherGradKernel);
}

}  // namespace pdist::exec::cuda
