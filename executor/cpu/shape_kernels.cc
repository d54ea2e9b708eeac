// CPU kernels of the shape ops: views (reshape, unsqueeze, squeeze) alias their input; transpose,
// split, concat and slice move bytes, so they serve every dtype.
#include <cstring>
#include <vector>

#include "executor/cpu/cpu_common.h"
#include "executor/cpu/cpu_kernels.h"
#include "executor/kernel.h"
#include "executor/shape_layout.h"
#include "ir/ops/op_helpers.h"
#include "ir/ops/shape.h"
#include "ir/status.h"

namespace pdist::exec::cpu {
namespace {

using ir::NumElements;

// Bytes copied per thread below which threads do not pay.
constexpr int64_t kGrainBytes = 1 << 16;
// Transpose tile edge: a 32×32 tile of 8-byte elements (8 KiB) stays in L1 for both read and write.
constexpr int64_t kTile = 32;

// --- transpose ---------------------------------------------------------------------------------

// One dim of the output: its size and the strides (in elements) of that dim in x and in out.
struct Dim {
  int64_t size, in_stride, out_stride;
};

// Output dims with their x strides, size-1 dims dropped and neighbours that are also neighbours
// in x merged: transpose [A,B,C] perm [2,0,1] becomes a 2-D transpose of [C, A·B].
std::vector<Dim> CoalescedDims(const Shape& x, const std::vector<int64_t>& perm) {
  const std::vector<int64_t> x_strides = Strides(x);
  std::vector<Dim> dims;
  for (int64_t p : perm) {
    const int64_t size = x[p], stride = x_strides[p];
    if (size == 1) continue;
    if (!dims.empty() && dims.back().in_stride == stride * size) {
      dims.back() = {dims.back().size * size, stride, 0};
    } else {
      dims.push_back({size, stride, 0});
    }
  }
  int64_t out_stride = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    dims[i].out_stride = out_stride;
    out_stride *= dims[i].size;
  }
  return dims;
}

// Offsets in x and out of entry `index` of the row-major space spanned by `dims`.
void Offsets(const std::vector<Dim>& dims, int64_t index, int64_t& in, int64_t& out) {
  in = out = 0;
  for (size_t d = dims.size(); d-- > 0;) {
    const int64_t i = index % dims[d].size;
    index /= dims[d].size;
    in += i * dims[d].in_stride;
    out += i * dims[d].out_stride;
  }
}

// E: an unsigned integer as wide as the element (the copy does not look at values).
template <typename E>
void Transpose(const E* x, E* out, std::vector<Dim> dims) {
  const Dim last = dims.back();
  dims.pop_back();
  if (last.in_stride == 1) {
    // The innermost dim stays innermost: copy whole rows.
    int64_t rows = 1;
    for (const Dim& d : dims) rows *= d.size;
    ParallelFor(rows, std::max<int64_t>(1, kGrainBytes / (last.size * sizeof(E))), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        int64_t in, o;
        Offsets(dims, r, in, o);
        std::memcpy(out + o, x + in, sizeof(E) * last.size);
      }
    });
    return;
  }
  // Otherwise x's innermost dim (stride 1) is output dim `p`: copy kTile×kTile tiles of the
  // (p, last) plane, reading x along p and writing out along last.
  size_t p = 0;
  while (dims[p].in_stride != 1) ++p;
  const Dim plane = dims[p];
  dims.erase(dims.begin() + static_cast<ptrdiff_t>(p));
  int64_t outer = 1;
  for (const Dim& d : dims) outer *= d.size;
  const int64_t tiles_p = (plane.size + kTile - 1) / kTile, tiles_last = (last.size + kTile - 1) / kTile;
  const int64_t tasks = outer * tiles_p * tiles_last;
  ParallelFor(tasks, std::max<int64_t>(1, kGrainBytes / (kTile * kTile * sizeof(E))), [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t tj = t % tiles_last, ti = (t / tiles_last) % tiles_p;
      int64_t in, o;
      Offsets(dims, t / (tiles_last * tiles_p), in, o);
      const int64_t i1 = std::min(plane.size, (ti + 1) * kTile), j1 = std::min(last.size, (tj + 1) * kTile);
      for (int64_t i = ti * kTile; i < i1; ++i) {
        const E* src = x + in + i;
        E* dst = out + o + i * plane.out_stride;
        for (int64_t j = tj * kTile; j < j1; ++j) dst[j] = src[j * last.in_stride];
      }
    }
  });
}

absl::Status TransposeKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  Tensor& out = ctx.AllocateOutput(0);
  PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> perm, ir::GetIntList(ctx.attrs(), "perm"));
  for (int64_t& p : perm) {
    PDIST_ASSIGN_OR_RETURN(p, ir::ops::NormalizeAxis(p, static_cast<int64_t>(x.shape().size())));
  }
  if (out.num_elements() == 0) return absl::OkStatus();
  const std::vector<Dim> dims = CoalescedDims(x.shape(), perm);
  if (dims.size() <= 1) {  // a single element, or a permutation that keeps the order of the bytes
    std::memcpy(out.raw(), x.raw(), static_cast<size_t>(x.num_bytes()));
    return absl::OkStatus();
  }
  switch (ir::DataTypeSize(x.dtype())) {
    case 1:
      Transpose(x.data<uint8_t>(), out.data<uint8_t>(), dims);
      break;
    case 2:
      Transpose(x.data<uint16_t>(), out.data<uint16_t>(), dims);
      break;
    case 4:
      Transpose(x.data<uint32_t>(), out.data<uint32_t>(), dims);
      break;
    case 8:
      Transpose(x.data<uint64_t>(), out.data<uint64_t>(), dims);
      break;
    default:
      return absl::InternalError("transpose: unexpected element size");
  }
  return absl::OkStatus();
}

// --- split / concat ----------------------------------------------------------------------------

// A tensor cut along `axis` into pieces: the whole is [outer, total·inner] and piece i is
// [outer, sizes[i]·inner] starting at column offsets[i]·inner. Copies between the whole and the
// pieces, one memcpy per (outer index, piece).
// to_pieces: whole → pieces (split); else pieces → whole (concat).
void CopyPieces(const Pieces& p, char* whole, const std::vector<char*>& pieces, bool to_pieces) {
  const int64_t n = static_cast<int64_t>(pieces.size());
  const int64_t bytes_per_task = std::max<int64_t>(1, p.total * p.inner_bytes / std::max<int64_t>(n, 1));
  ParallelFor(p.outer * n, std::max<int64_t>(1, kGrainBytes / bytes_per_task), [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t o = t / n, i = t % n;
      const int64_t bytes = p.sizes[i] * p.inner_bytes;
      char* w = whole + (o * p.total + p.offsets[i]) * p.inner_bytes;
      char* piece = pieces[i] + o * bytes;
      if (to_pieces)
        std::memcpy(piece, w, static_cast<size_t>(bytes));
      else
        std::memcpy(w, piece, static_cast<size_t>(bytes));
    }
  });
}

// split and split_with_num: the result shapes already hold the sections.
absl::Status SplitKernel(KernelContext& ctx) {
  PDIST_ASSIGN_OR_RETURN(PieceCopy c, PlanSplit(ctx));
  CopyPieces(c.layout, c.whole, c.pieces, /*to_pieces=*/true);
  return absl::OkStatus();
}

absl::Status ConcatKernel(KernelContext& ctx) {
  PDIST_ASSIGN_OR_RETURN(PieceCopy c, PlanConcat(ctx));
  CopyPieces(c.layout, c.whole, c.pieces, /*to_pieces=*/false);
  return absl::OkStatus();
}

// --- slice / slice_grad ------------------------------------------------------------------------

// Copies between a tensor of shape `whole` and the window (starts, sizes) of it, stored
// contiguously: to_window (slice) or back into the whole (slice_grad). Trailing dims that the
// window spans entirely merge into longer rows, one memcpy each.
void CopyWindow(const Shape& whole, const ir::ops::SliceWindow& w, int64_t element_size, char* whole_data,
                char* window_data, bool to_window) {
  if (NumElements(w.sizes) == 0) return;
  const std::vector<int64_t> strides = Strides(whole);
  int64_t k = static_cast<int64_t>(whole.size()) - 1;
  int64_t row = element_size;
  while (k >= 0 && w.starts[k] == 0 && w.sizes[k] == whole[k]) row *= whole[k--];
  int64_t row_start = 0;  // bytes from a row's window-origin to its first copied byte
  if (k >= 0) {
    row_start = w.starts[k] * strides[k] * element_size;
    row *= w.sizes[k];
  }
  const int64_t rows = k > 0 ? NumElements(Shape(w.sizes.begin(), w.sizes.begin() + k)) : 1;
  ParallelFor(rows, std::max<int64_t>(1, kGrainBytes / row), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      int64_t offset = row_start, rest = r;
      for (int64_t d = k - 1; d >= 0; --d) {
        offset += (w.starts[d] + rest % w.sizes[d]) * strides[d] * element_size;
        rest /= w.sizes[d];
      }
      char* in_whole = whole_data + offset;
      char* in_window = window_data + r * row;
      if (to_window)
        std::memcpy(in_window, in_whole, static_cast<size_t>(row));
      else
        std::memcpy(in_whole, in_window, static_cast<size_t>(row));
    }
  });
}

absl::Status SliceKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  PDIST_ASSIGN_OR_RETURN(ir::ops::SliceWindow w, ir::ops::InferSliceWindow(x.shape(), ctx.attrs()));
  Tensor& out = ctx.AllocateOutput(0);
  CopyWindow(x.shape(), w, ir::DataTypeSize(x.dtype()), static_cast<char*>(x.raw()), static_cast<char*>(out.raw()),
             /*to_window=*/true);
  return absl::OkStatus();
}

// slice_grad(input, out_grad): out_grad written into zeros of input's type.
absl::Status SliceGradKernel(KernelContext& ctx) {
  const Shape& x = ctx.input(0)->shape();
  PDIST_ASSIGN_OR_RETURN(ir::ops::SliceWindow w, ir::ops::InferSliceWindow(x, ctx.attrs()));
  Tensor& dx = ctx.AllocateOutput(0);
  std::memset(dx.raw(), 0, static_cast<size_t>(dx.num_bytes()));
  CopyWindow(x, w, ir::DataTypeSize(dx.dtype()), static_cast<char*>(dx.raw()), static_cast<char*>(ctx.input(1)->raw()),
             /*to_window=*/false);
  return absl::OkStatus();
}

}  // namespace

void RegisterShapeKernels(KernelRegistry& registry) {
  RegisterViewKernels(registry, DeviceType::kCPU);
  registry.Register(DeviceType::kCPU, "transpose", TransposeKernel);
  registry.Register(DeviceType::kCPU, "split", SplitKernel);
  registry.Register(DeviceType::kCPU, "split_with_num", SplitKernel);
  registry.Register(DeviceType::kCPU, "concat", ConcatKernel);
  registry.Register(DeviceType::kCPU, "slice", SliceKernel);
  registry.Register(DeviceType::kCPU, "slice_grad", SliceGradKernel);
}

}  // namespace pdist::exec::cpu
