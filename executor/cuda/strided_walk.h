// StridedIndex (executor/cuda/launch.h) from the host's shapes and strides, refusing ranks the
// device walk cannot hold, naming the op.
#pragma once

#include <array>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "executor/cuda/launch.h"

namespace pdist::exec::cuda {

// A walk over `shape` (row-major) carrying operand k's offset by strides[k].
template <int N>
inline absl::StatusOr<StridedIndex<N>> Walk(const char* op, const std::vector<int64_t>& shape,
                                            const std::array<std::vector<int64_t>, N>& strides) {
  if (shape.size() > static_cast<size_t>(kMaxRank)) {
    return absl::UnimplementedError(absl::StrCat(op, " on cuda: rank ", shape.size(), " above ", kMaxRank));
  }
  StridedIndex<N> index;
  index.rank = static_cast<int>(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    index.shape[d] = shape[d];
    for (int k = 0; k < N; ++k) index.stride[k][d] = strides[k][d];
  }
  return index;
}

}  // namespace pdist::exec::cuda
