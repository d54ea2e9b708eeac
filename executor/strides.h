// Element strides of row-major shapes, for every backend's kernels.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/types.h"

namespace pdist::exec {

// Row-major strides.
std::vector<int64_t> Strides(const ir::Shape& shape);
// Strides (in elements) of `shape` broadcast to `out_shape` (numpy rules, aligned at the last
// dim): 0 along broadcast dims and along the dims `shape` lacks.
std::vector<int64_t> BroadcastStrides(const ir::Shape& shape, const ir::Shape& out_shape);

}  // namespace pdist::exec
