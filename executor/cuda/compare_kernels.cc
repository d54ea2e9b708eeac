// Host side of the CUDA comparisons and where (device side: compare_launch.cu): operands
// broadcast to the result's shape as on the CPU.
#include <string>

#include "absl/strings/str_cat.h"
#include "executor/cuda/cuda_backend.h"
#include "executor/cuda/cuda_kernels.h"
#include "executor/cuda/cuda_status.h"
#include "executor/cuda/launch.h"
#include "executor/cuda/strided_walk.h"
#include "executor/kernel.h"
#include "executor/strides.h"
#include "ir/status.h"

namespace pdist::exec::cuda {
namespace {

absl::StatusOr<CompareType> CompareTypeOf(const char* op, ir::DataType dtype) {
  switch (dtype) {
    case ir::DataType::kFloat32: return CompareType::kF32;
    case ir::DataType::kFloat64: return CompareType::kF64;
    case ir::DataType::kBFloat16: return CompareType::kBF16;
    case ir::DataType::kFloat16: return CompareType::kF16;
    case ir::DataType::kInt32: return CompareType::kI32;
    case ir::DataType::kInt64: return CompareType::kI64;
    default: break;
  }
  return absl::UnimplementedError(absl::StrCat(op, " on cuda does not compare ", ir::DataTypeName(dtype)));
}

template <CompareOp kOp>
absl::Status CompareKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  const Tensor& y = *ctx.input(1);
  const char* name = ctx.op().type().c_str();
  PDIST_ASSIGN_OR_RETURN(CompareType type, CompareTypeOf(name, x.dtype()));
  Tensor& out = ctx.AllocateOutput(0);
  const ir::Shape& shape = out.shape();
  PDIST_RETURN_IF_ERROR(CheckBroadcastsTo(name, shape, {&x.shape(), &y.shape()}));
  PDIST_ASSIGN_OR_RETURN(StridedIndex<2> index,
                         Walk<2>(name, shape, {BroadcastStrides(x.shape(), shape), BroadcastStrides(y.shape(), shape)}));
  return CudaStatus(
      LaunchCompare(kOp, type, x.raw(), y.raw(), out.data<bool>(), out.num_elements(), index, StreamOf(ctx)), name);
}

absl::Status WhereKernel(KernelContext& ctx) {
  const Tensor& condition = *ctx.input(0);
  const Tensor& x = *ctx.input(1);
  const Tensor& y = *ctx.input(2);
  Tensor& out = ctx.AllocateOutput(0);
  const ir::Shape& shape = out.shape();
  PDIST_RETURN_IF_ERROR(CheckBroadcastsTo("where", shape, {&condition.shape(), &x.shape(), &y.shape()}));
  PDIST_ASSIGN_OR_RETURN(StridedIndex<3> index,
                         Walk<3>("where", shape,
                                 {BroadcastStrides(condition.shape(), shape), BroadcastStrides(x.shape(), shape),
                                  BroadcastStrides(y.shape(), shape)}));
  return CudaStatus(LaunchWhere(static_cast<int>(ir::DataTypeSize(x.dtype())), condition.data<bool>(), x.raw(), y.raw(),
                                out.raw(), out.num_elements(), index, StreamOf(ctx)),
                    "where");
}

}  // namespace

void RegisterCompareKernels(KernelRegistry& registry) {
  registry.Register(DeviceType::kCUDA, "greater_than", CompareKernel<CompareOp::kGreaterThan>);
  registry.Register(DeviceType::kCUDA, "less_than", CompareKernel<CompareOp::kLessThan>);
  registry.Register(DeviceType::kCUDA, "equal", CompareKernel<CompareOp::kEqual>);
  registry.Register(DeviceType::kCUDA, "where", WhereKernel);
}

}  // namespace pdist::exec::cuda
