// Device-neutral pieces of the shape kernels: the views (reshape, unsqueeze, squeeze alias their
// input, on whatever device it is), the layout of split and concat (which bytes of the whole
// each piece is) and the rows × cols view of a norm's input. The CPU copies the pieces with memcpy (executor/cpu/shape_kernels.cc), the
// GPU with one cudaMemcpy2DAsync per piece (executor/cuda/shape_kernels.cc).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "executor/kernel.h"

namespace pdist::exec {

// reshape, unsqueeze, squeeze: the result shares x's buffer.
absl::Status ViewKernel(KernelContext& ctx);
// ViewKernel for every op the registry marks a view (ir::OpDef::view), on `device`.
void RegisterViewKernels(KernelRegistry& registry, DeviceType device);

// A whole tensor cut along `axis` into pieces: `outer` rows (the dims before the axis), each
// holding every piece's `sizes[i]` steps of `inner_bytes` at step offset `offsets[i]` of
// `total` steps.
struct Pieces {
  int64_t outer = 1;
  int64_t inner_bytes = 1;  // bytes of one step along the axis
  int64_t total = 0;
  std::vector<int64_t> sizes, offsets;
};
Pieces PiecesOf(const ir::Shape& whole, int64_t axis, const std::vector<const Tensor*>& pieces, int64_t element_size);

// What a split or a concat copies: the layout, the whole's bytes and each piece's. PlanSplit
// allocates every result (the pieces); PlanConcat allocates the result (the whole).
struct PieceCopy {
  Pieces layout;
  char* whole = nullptr;
  std::vector<char*> pieces;
};
absl::StatusOr<PieceCopy> PlanSplit(KernelContext& ctx);
absl::StatusOr<PieceCopy> PlanConcat(KernelContext& ctx);

// layer_norm and rms_norm see x as [rows, cols], the normalised axes (from the op's
// begin_norm_axis on) flattened into cols.
struct RowsCols {
  int64_t rows = 1;
  int64_t cols = 1;
};
absl::StatusOr<RowsCols> NormRowsCols(const KernelContext& ctx, const ir::Shape& x);

// A tensor of shape [..a.., n, ..b..] reduced along the axis of length n, viewed as
// [outer, n, inner]; each of the outer * inner "lanes" is a strided vector of n elements.
struct AxisView {
  int64_t outer = 1;
  int64_t n = 1;
  int64_t inner = 1;

  int64_t lanes() const { return outer * inner; }
  // Offset of the first element of lane `lane` (lanes are numbered outer-major).
  int64_t LaneStart(int64_t lane) const { return (lane / inner) * n * inner + lane % inner; }
};

// `axis` must already be normalised to [0, rank); a rank-0 shape is one lane of one element.
inline AxisView MakeAxisView(const ir::Shape& shape, int64_t axis) {
  AxisView v;
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i) {
    const int64_t d = shape[static_cast<size_t>(i)];
    if (i < axis)
      v.outer *= d;
    else if (i == axis)
      v.n = d;
    else
      v.inner *= d;
  }
  return v;
}

// The op's `axis` attribute, negative values counted from the end of `shape`.
absl::StatusOr<int64_t> AxisOf(const KernelContext& ctx, const ir::Shape& shape);

}  // namespace pdist::exec
