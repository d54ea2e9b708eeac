// CUDA kernels of the shape ops and full: views alias (the device-neutral ViewKernel); split and
// concat are one cudaMemcpy2DAsync per piece (the whole is [outer, total·inner] bytes, a piece
// [outer, size·inner] at column offset·inner); full writes the value the host converted.
#include <cstring>
#include <vector>

#include "executor/cuda/cuda_backend.h"
#include "executor/cuda/cuda_kernels.h"
#include "executor/cuda/cuda_status.h"
#include "executor/cuda/launch.h"
#include "executor/kernel.h"
#include "executor/shape_layout.h"
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

void RegisterShapeKernels(KernelRegistry& registry) {
  for (const char* view : {"reshape", "unsqueeze", "squeeze"}) registry.Register(DeviceType::kCUDA, view, ViewKernel);
  registry.Register(DeviceType::kCUDA, "split", SplitKernel);
  registry.Register(DeviceType::kCUDA, "split_with_num", SplitKernel);
  registry.Register(DeviceType::kCUDA, "concat", ConcatKernel);
  registry.Register(DeviceType::kCUDA, "full", FullKernel);
}

}  // namespace pdist::exec::cuda
