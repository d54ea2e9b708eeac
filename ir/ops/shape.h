// Shape rules of the shape ops shared by their definitions (ir/ops/shape.cc, ir/ops/slicing.cc)
// and the CPU kernels.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/attribute.h"
#include "ir/types.h"

namespace pdist::ir {
class OpRegistry;
}

namespace pdist::ir::ops {

// The window `slice` cuts out of a tensor, per dim of the input: starts after Paddle's (numpy's)
// clamping, sizes (the full dim where an axis is not sliced), and the result shape without the
// decrease_axis dims.
//
//   x [4,10], axes [1], starts [-3], ends [100]  →  starts [0,7], sizes [4,3], out [4,3]
struct SliceWindow {
  std::vector<int64_t> starts;
  std::vector<int64_t> sizes;
  Shape out;
};
// Reads axes, starts, ends and decrease_axis from `attrs` (slice's or slice_grad's).
absl::StatusOr<SliceWindow> InferSliceWindow(const Shape& x, const AttributeMap& attrs);

// Registers split, split_with_num, concat, slice and slice_grad (ir/ops/slicing.cc); called by
// RegisterShapeOps.
absl::Status RegisterSlicingOps(OpRegistry& registry);

}  // namespace pdist::ir::ops
