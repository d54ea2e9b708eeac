// The axis rule of the reductions (sum, mean, max, min), shared by ir/ops/reduction.cc and the
// CPU kernels.
//
//   x [4,5,6], axis [-1, 0]  →  reduced {true, false, true}; out [5] ([1,5,1] with keep_dim)
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/types.h"

namespace pdist::ir::ops {

// Which of the `rank` axes `axis` names (negative counts from the end; empty = every axis, as in
// Paddle). Errors: an axis out of range, an axis named twice.
absl::StatusOr<std::vector<bool>> ReducedAxes(int64_t rank, const std::vector<int64_t>& axis);

// x's shape with the reduced axes dropped (or kept as 1).
Shape ReducedShape(const Shape& x, const std::vector<bool>& reduced, bool keep_dim);

}  // namespace pdist::ir::ops
