// StridedIndex (executor/cuda/launch.h) from the host's shapes and strides, refusing ranks the
// device walk cannot hold, naming the op.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "executor/cuda/launch.h"
#include "executor/kernel.h"
#include "ir/types.h"

namespace pdist::exec::cuda {

// A walk over `shape` (row-major) carrying operand k's offset by strides[k].
template <int N>
inline absl::StatusOr<StridedIndex<N>> Walk(const char* op, const std::vector<int64_t>& shape,
                                            const std::array<std::vector<int64_t>, N>& strides) {
  if (shape.size() > static_cast<size_t>(kMaxRank)) {
    return absl::UnimplementedError(absl::StrCat(op, " on cuda: rank ", shape.size(), " above ", kMaxRank));
  }
  // Dims of size 1 drop, and a dim merges into the one before it where every operand walks the
  // two as one (outer stride = inner stride · inner size): the same offsets for every flat index,
  // with fewer divisions per element on the device (none for a same-shape operand, one for a
  // bias broadcast over rows).
  StridedIndex<N> index;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    const int last = index.rank - 1;
    bool merges = last >= 0;
    for (int k = 0; k < N && merges; ++k) merges = index.stride[k][last] == strides[k][d] * shape[d];
    if (merges) {
      index.shape[last] *= shape[d];
      for (int k = 0; k < N; ++k) index.stride[k][last] = strides[k][d];
      continue;
    }
    index.shape[index.rank] = shape[d];
    for (int k = 0; k < N; ++k) index.stride[k][index.rank] = strides[k][d];
    ++index.rank;
  }
  int64_t elements = 1;
  for (int d = 0; d < index.rank; ++d) elements *= index.shape[d];
  index.narrow = elements <= int64_t{UINT32_MAX};
  return index;
}

// dst[walk of `shape` by dst_strides] = src[walk by src_strides], elements of `element_size`
// bytes moved as bits, on the kernel's stream (executor/cuda/shape_kernels.cc).
absl::Status StridedCopy(const KernelContext& ctx, const ir::Shape& shape, const void* src,
                         std::vector<int64_t> src_strides, void* dst, std::vector<int64_t> dst_strides,
                         int64_t element_size);

}  // namespace pdist::exec::cuda
