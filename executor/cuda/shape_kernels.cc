// CUDA kernels of the shape ops and full: views alias (the device-neutral ViewKernel); split and
// concat are one cudaMemcpy2DAsync per piece (the whole is [outer, total·inner] bytes, a piece
// [outer, size·inner] at column offset·inner); transpose, expand, slice and slice_grad are one
// strided copy each (elements moved as bits, so every dtype); full writes the value the host
// converted.
#include <cstring>
#include <vector>

#include "executor/cuda/cuda_backend.h"
#include "executor/cuda/cuda_kernels.h"
#include "executor/cuda/cuda_status.h"
#include "executor/cuda/launch.h"
#include "executor/kernel.h"
#include "executor/cuda/strided_walk.h"
#include "executor/shape_layout.h"
#include "executor/strides.h"
#include "ir/ops/op_helpers.h"
#include "ir/ops/shape.h"
#include "ir/status.h"

namespace pdist::exec::cuda {
namespace {

// Copies piece i between the whole and its own buffer: to_pieces (split) or back (concat).
absl::Status CopyPieces(const Pieces& p, char* whole, const std::vector<char*>& pieces, bool to_pieces,
                        cudaStream_t stream) {
  const size_t whole_pitch = static_cast<size_t>(p.total * p.inner_bytes);
  for (size_t i = 0; i < pieces.size(); ++i) {
    const size_t width = static_cast<size_t>(p.sizes[i] * p.inner_bytes);
    if (width == 0 || p.outer == 0) continue;
    char* in_whole = whole + p.offsets[i] * p.inner_bytes;
    PDIST_CUDA_RETURN_IF_ERROR(
        to_pieces ? cudaMemcpy2DAsync(pieces[i], width, in_whole, whole_pitch, width, static_cast<size_t>(p.outer),
                                      cudaMemcpyDeviceToDevice, stream)
                  : cudaMemcpy2DAsync(in_whole, whole_pitch, pieces[i], width, width, static_cast<size_t>(p.outer),
                                      cudaMemcpyDeviceToDevice, stream));
  }
  return absl::OkStatus();
}

absl::Status SplitKernel(KernelContext& ctx) {
  PDIST_ASSIGN_OR_RETURN(PieceCopy c, PlanSplit(ctx));
  return CopyPieces(c.layout, c.whole, c.pieces, /*to_pieces=*/true, StreamOf(ctx));
}

absl::Status ConcatKernel(KernelContext& ctx) {
  PDIST_ASSIGN_OR_RETURN(PieceCopy c, PlanConcat(ctx));
  return CopyPieces(c.layout, c.whole, c.pieces, /*to_pieces=*/false, StreamOf(ctx));
}

absl::Status TransposeKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> perm, ir::GetIntList(ctx.attrs(), "perm"));
  const std::vector<int64_t> x_strides = Strides(x.shape());
  std::vector<int64_t> read(perm.size());
  for (size_t d = 0; d < perm.size(); ++d) {
    PDIST_ASSIGN_OR_RETURN(const int64_t axis, ir::ops::NormalizeAxis(perm[d], static_cast<int64_t>(x.shape().size())));
    read[d] = x_strides[static_cast<size_t>(axis)];  // out's dim d walks x's dim perm[d]
  }
  Tensor& out = ctx.AllocateOutput(0);
  return StridedCopy(ctx, out.shape(), x.raw(), read, out.raw(), Strides(out.shape()), ir::DataTypeSize(x.dtype()));
}

absl::Status ExpandKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  Tensor& out = ctx.AllocateOutput(0);
  PDIST_RETURN_IF_ERROR(CheckBroadcastsTo("expand", out.shape(), {&x.shape()}));
  return StridedCopy(ctx, out.shape(), x.raw(), BroadcastStrides(x.shape(), out.shape()), out.raw(),
                     Strides(out.shape()), ir::DataTypeSize(x.dtype()));
}

// The window's first element in `whole` (bytes from its start).
int64_t WindowOrigin(const ir::Shape& whole, const ir::ops::SliceWindow& w, int64_t element_size) {
  const std::vector<int64_t> strides = Strides(whole);
  int64_t origin = 0;
  for (size_t d = 0; d < strides.size(); ++d) origin += w.starts[d] * strides[d];
  return origin * element_size;
}

absl::Status SliceKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  PDIST_ASSIGN_OR_RETURN(ir::ops::SliceWindow w, ir::ops::InferSliceWindow(x.shape(), ctx.attrs()));
  Tensor& out = ctx.AllocateOutput(0);
  const int64_t size = ir::DataTypeSize(x.dtype());
  const ir::Shape window(w.sizes.begin(), w.sizes.end());
  return StridedCopy(ctx, window, static_cast<const char*>(x.raw()) + WindowOrigin(x.shape(), w, size),
                     Strides(x.shape()), out.raw(), Strides(window), size);
}

// slice_grad(input, out_grad): out_grad written into zeros of input's type.
absl::Status SliceGradKernel(KernelContext& ctx) {
  const ir::Shape& x = ctx.input(0)->shape();
  PDIST_ASSIGN_OR_RETURN(ir::ops::SliceWindow w, ir::ops::InferSliceWindow(x, ctx.attrs()));
  Tensor& dx = ctx.AllocateOutput(0);
  const int64_t size = ir::DataTypeSize(dx.dtype());
  PDIST_RETURN_IF_ERROR(CudaStatus(LaunchFill(dx.raw(), dx.num_elements(), static_cast<int>(size), 0, StreamOf(ctx)),
                                   "slice_grad"));
  const ir::Shape window(w.sizes.begin(), w.sizes.end());
  return StridedCopy(ctx, window, ctx.input(1)->raw(), Strides(window),
                     static_cast<char*>(dx.raw()) + WindowOrigin(x, w, size), Strides(x), size);
}

absl::Status FullKernel(KernelContext& ctx) {
  PDIST_ASSIGN_OR_RETURN(double value, ir::GetDouble(ctx.attrs(), "value"));
  Tensor& out = ctx.AllocateOutput(0);
  // The value in the result's dtype, converted on the host exactly as the CPU kernel converts it.
  const Tensor one = TensorFromDoubles({{}, out.dtype()}, {value});
  const int size = static_cast<int>(ir::DataTypeSize(out.dtype()));
  uint64_t pattern = 0;
  std::memcpy(&pattern, one.raw(), static_cast<size_t>(size));
  return CudaStatus(LaunchFill(out.raw(), out.num_elements(), size, pattern, StreamOf(ctx)), "full");
}

}  // namespace

absl::Status StridedCopy(const KernelContext& ctx, const ir::Shape& shape, const void* src,
                         std::vector<int64_t> src_strides, void* dst, std::vector<int64_t> dst_strides,
                         int64_t element_size) {
  const char* op = ctx.op().type().c_str();
  PDIST_ASSIGN_OR_RETURN(StridedIndex<2> index, Walk<2>(op, shape, {std::move(src_strides), std::move(dst_strides)}));
  return CudaStatus(LaunchStridedCopy(static_cast<int>(element_size), src, dst, ir::NumElements(shape), index,
                                      StreamOf(ctx)),
                    op);
}

void RegisterShapeKernels(KernelRegistry& registry) {
  RegisterViewKernels(registry, DeviceType::kCUDA);
  registry.Register(DeviceType::kCUDA, "split", SplitKernel);
  registry.Register(DeviceType::kCUDA, "split_with_num", SplitKernel);
  registry.Register(DeviceType::kCUDA, "concat", ConcatKernel);
  registry.Register(DeviceType::kCUDA, "full", FullKernel);
  registry.Register(DeviceType::kCUDA, "transpose", TransposeKernel);
  registry.Register(DeviceType::kCUDA, "expand", ExpandKernel);
  registry.Register(DeviceType::kCUDA, "slice", SliceKernel);
  registry.Register(DeviceType::kCUDA, "slice_grad", SliceGradKernel);
}

}  // namespace pdist::exec::cuda
