// Host side of the CUDA sum, mean, max, min and their gradients (device side: reduction_launch.cu):
// x's dims split into the kept ones (out's elements) and the reduced ones (each output's
// positions), size-1 dims dropped.
#include <array>
#include <vector>

#include "executor/cuda/cuda_backend.h"
#include "executor/cuda/cuda_kernels.h"
#include "executor/cuda/cuda_status.h"
#include "executor/cuda/elem_type.h"
#include "executor/cuda/launch.h"
#include "executor/cuda/strided_walk.h"
#include "executor/kernel.h"
#include "executor/strides.h"
#include "ir/ops/reduction.h"
#include "ir/status.h"

namespace pdist::exec::cuda {
namespace {

struct Split {
  std::vector<int64_t> kept_dims, kept_strides, reduced_dims, reduced_strides;
  int64_t count = 1;  // positions reduced into each output
};

absl::StatusOr<Split> SplitAxes(const KernelContext& ctx, const ir::Shape& x) {
  PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> axis, ir::GetIntList(ctx.attrs(), "axis"));
  PDIST_ASSIGN_OR_RETURN(std::vector<bool> reduced, ir::ops::ReducedAxes(static_cast<int64_t>(x.size()), axis));
  const std::vector<int64_t> strides = Strides(x);
  Split s;
  for (size_t d = 0; d < x.size(); ++d) {
    if (reduced[d]) s.count *= x[d];
    if (x[d] == 1) continue;
    (reduced[d] ? s.reduced_dims : s.kept_dims).push_back(x[d]);
    (reduced[d] ? s.reduced_strides : s.kept_strides).push_back(strides[d]);
  }
  return s;
}

KernelFn SumKernel(bool mean) {
  return [mean](KernelContext& ctx) -> absl::Status {
    const Tensor& x = *ctx.input(0);
    const char* name = mean ? "mean" : "sum";
    PDIST_ASSIGN_OR_RETURN(ElemType type, ElemTypeOf(name, x.dtype()));
    PDIST_ASSIGN_OR_RETURN(Split s, SplitAxes(ctx, x.shape()));
    PDIST_ASSIGN_OR_RETURN(StridedIndex<1> kept, Walk<1>(name, s.kept_dims, {s.kept_strides}));
    PDIST_ASSIGN_OR_RETURN(StridedIndex<1> reduced, Walk<1>(name, s.reduced_dims, {s.reduced_strides}));
    Tensor& out = ctx.AllocateOutput(0);
    return CudaStatus(LaunchSum(type, x.raw(), out.raw(), out.num_elements(), kept, reduced, mean, StreamOf(ctx)), name);
  };
}

// sum_grad(x, out_grad), mean_grad(x, out_grad): out_grad broadcast back, / count for mean. x
// is there for its type alone (the kernel gets no tensor): x_grad has it.
KernelFn BroadcastGradKernel(bool mean) {
  return [mean](KernelContext& ctx) -> absl::Status {
    const ir::Shape& x = ctx.output_type(0).shape;
    const char* name = mean ? "mean_grad" : "sum_grad";
    PDIST_ASSIGN_OR_RETURN(ElemType type, ElemTypeOf(name, ctx.input(1)->dtype()));
    PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> axis, ir::GetIntList(ctx.attrs(), "axis"));
    PDIST_ASSIGN_OR_RETURN(std::vector<bool> reduced, ir::ops::ReducedAxes(static_cast<int64_t>(x.size()), axis));
    // out_grad's strides along x's dims: its own along the kept ones, 0 along the reduced.
    std::vector<int64_t> g_strides(x.size(), 0);
    int64_t stride = 1, count = 1;
    for (size_t d = x.size(); d-- > 0;) {
      if (reduced[d]) {
        count *= x[d];
        continue;
      }
      g_strides[d] = stride;
      stride *= x[d];
    }
    PDIST_ASSIGN_OR_RETURN(StridedIndex<1> index, Walk<1>(name, x, {g_strides}));
    Tensor& dx = ctx.AllocateOutput(0);
    return CudaStatus(LaunchBroadcastBack(type, ctx.input(1)->raw(), dx.raw(), dx.num_elements(), index,
                                          mean ? static_cast<double>(count) : 1.0, StreamOf(ctx)),
                      name);
  };
}

// max or min over the attribute's axes.
KernelFn ExtremeKernel(bool max) {
  return [max](KernelContext& ctx) -> absl::Status {
    const Tensor& x = *ctx.input(0);
    const char* name = max ? "max" : "min";
    PDIST_ASSIGN_OR_RETURN(ElemType type, ElemTypeOf(name, x.dtype()));
    PDIST_ASSIGN_OR_RETURN(Split s, SplitAxes(ctx, x.shape()));
    PDIST_ASSIGN_OR_RETURN(StridedIndex<1> kept, Walk<1>(name, s.kept_dims, {s.kept_strides}));
    PDIST_ASSIGN_OR_RETURN(StridedIndex<1> reduced, Walk<1>(name, s.reduced_dims, {s.reduced_strides}));
    Tensor& out = ctx.AllocateOutput(0);
    return CudaStatus(LaunchExtreme(type, x.raw(), out.raw(), out.num_elements(), kept, reduced, max, StreamOf(ctx)),
                      name);
  };
}

// max_grad(x, out, out_grad), min_grad(x, out, out_grad).
absl::Status ExtremeGradKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  const char* name = ctx.op().type().c_str();
  PDIST_ASSIGN_OR_RETURN(ElemType type, ElemTypeOf(name, x.dtype()));
  PDIST_ASSIGN_OR_RETURN(Split s, SplitAxes(ctx, x.shape()));
  PDIST_ASSIGN_OR_RETURN(StridedIndex<1> kept, Walk<1>(name, s.kept_dims, {s.kept_strides}));
  PDIST_ASSIGN_OR_RETURN(StridedIndex<1> reduced, Walk<1>(name, s.reduced_dims, {s.reduced_strides}));
  Tensor& dx = ctx.AllocateOutput(0);
  return CudaStatus(LaunchExtremeGrad(type, x.raw(), ctx.input(1)->raw(), ctx.input(2)->raw(), dx.raw(),
                                      ctx.input(1)->num_elements(), kept, reduced, StreamOf(ctx)),
                    name);
}

}  // namespace

void RegisterReductionKernels(KernelRegistry& registry) {
  registry.Register(DeviceType::kCUDA, "sum", SumKernel(false));
  registry.Register(DeviceType::kCUDA, "mean", SumKernel(true));
  registry.Register(DeviceType::kCUDA, "sum_grad", BroadcastGradKernel(false));
  registry.Register(DeviceType::kCUDA, "mean_grad", BroadcastGradKernel(true));
  registry.Register(DeviceType::kCUDA, "max", ExtremeKernel(true));
  registry.Register(DeviceType::kCUDA, "min", ExtremeKernel(false));
  registry.Register(DeviceType::kCUDA, "max_grad", ExtremeGradKernel);
  registry.Register(DeviceType::kCUDA, "min_grad", ExtremeGradKernel);
}

}  // namespace pdist::exec::cuda
