// Element strides of row-major shapes, for every backend's kernels.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "absl/status/status.h"

#include "ir/types.h"

namespace pdist::exec {

// Row-major strides.
std::vector<int64_t> Strides(const ir::Shape& shape);
// Strides (in elements) of `shape` broadcast to `out_shape` (numpy rules, aligned at the last
// dim): 0 along broadcast dims and along the dims `shape` lacks.
std::vector<int64_t> BroadcastStrides(const ir::Shape& shape, const ir::Shape& out_shape);

// Whether every shape in `inputs` broadcasts to `out` (numpy rules): a strided walk built from
// BroadcastStrides reads out of bounds otherwise, so a program whose types disagree with its
// tensors fails here, naming `op` and the shapes.
absl::Status CheckBroadcastsTo(const char* op, const ir::Shape& out, std::initializer_list<const ir::Shape*> inputs);

}  // namespace pdist::exec
