// LocalSlice: which box of a global tensor one rank holds under a DistAttr — the offsets and
// sizes per tensor dim. Partition uses it for local shapes, the engine to cut a global batch
// into a rank's feed and to initialise a parameter shard as the slice of the whole tensor.
//
//   x f32[8,16], {mesh: [2,2] [dp,mp], dims_mapping: [0,1]}, rank 3 (coordinate [1,1]):
//   SliceOf(attr, {8,16}, 3) → offsets [4,8], sizes [4,8]
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "ir/dist/dist_attr.h"
#include "ir/types.h"

namespace pdist::ir {

struct LocalSlice {
  Shape offsets;
  Shape sizes;
};

// Shards must be even (CheckEvenShards); InvalidArgument when the mesh lacks `rank` or a dim
// does not divide.
absl::StatusOr<LocalSlice> SliceOf(const DistAttr& attr, const Shape& global, int64_t rank);

// The global shape of a rank's local piece: every sharded dim times its mesh dim's size.
Shape GlobalShapeOf(const DistAttr& attr, const Shape& local);

}  // namespace pdist::ir
