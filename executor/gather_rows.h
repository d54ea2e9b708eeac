// The host side of the gather kernels on every backend: x seen as [outer, axis, inner] around
// the gathered axis, and the indices checked against the axis and made non-negative.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "executor/tensor.h"

namespace pdist::exec {

struct GatherView {
  int64_t outer = 1, axis = 1, inner = 1;
  std::vector<int64_t> rows;  // index[j], normalised to [0, axis)
};

// The view of `x_shape` along `axis` (negative: from the end) and `index` (an i32 or i64 host
// tensor) checked against it; the error names the first offender and `op`.
absl::StatusOr<GatherView> GatherViewOf(const ir::Shape& x_shape, int64_t axis, const Tensor& index, const char* op);

}  // namespace pdist::exec
