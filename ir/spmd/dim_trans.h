// DimTrans: how each output dim of a reshape-like op is made from input dims (Paddle's
// dim_trans), and how shardings travel through it.
//
//   MakeReshapeDimTrans([6,12,48,24], [1,72,48,4,6])
//     → 1, (ab), c, split(d,[4,6],0), split(d,[4,6],1)       (input dims written a, b, c, d)
//   InferFromDimTrans on mesh [2,3], x [0,-1,1,-1]
//     → input [0,-1,1,-1], output [-1,0,1,-1,-1]
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/dist/dist_attr.h"
#include "ir/types.h"

namespace pdist::ir::spmd {

struct DimTrans {
  enum class Kind : int8_t {
    kInputDim,   // the input dim `input_dim`, unchanged
    kSingleton,  // a new dim of size 1
    kFlatten,    // the input dims in `parts` merged, outermost first
    kSplit,      // part `split_id` of parts[0] cut into `split_shape`
  };
  Kind kind = Kind::kSingleton;
  int64_t input_dim = -1;
  std::vector<DimTrans> parts;
  Shape split_shape;
  int64_t split_id = 0;

  static DimTrans InputDim(int64_t dim);
  static DimTrans Singleton();
  // Paddle's make_flatten: [] → Singleton, [x] → x.
  static DimTrans Flatten(std::vector<DimTrans> parts);
  // Paddle's make_split: one part → the input itself; a part of size 1 → Singleton.
  static DimTrans Split(DimTrans input, Shape split_shape, int64_t split_id);

  // Input dims as letters (0 → a): "a", "1", "(ab)", "split((ab),[4,18],0)".
  std::string ToString() const;

  friend bool operator==(const DimTrans&, const DimTrans&) = default;
};

// "1,(ab),c,split(d,[4,6],0),split(d,[4,6],1)"
std::string DimTransListToString(const std::vector<DimTrans>& dims);

// One DimTrans per target dim for reshaping `src` into `tgt` (at most one -1 in tgt, inferred).
// Dims are matched by walking both shapes and growing the smaller running product until the
// two agree, skipping size-1 dims; each matched group becomes Split(Flatten(src dims > 1)).
// Errors (InvalidArgument) name both shapes: more than one -1, element counts that differ, a dim
// that is not positive.
absl::StatusOr<std::vector<DimTrans>> MakeReshapeDimTrans(const Shape& src, const Shape& tgt);

// The resolved target shape (its -1 inferred) that MakeReshapeDimTrans works with.
absl::StatusOr<Shape> InferReshapeTarget(const Shape& src, const Shape& tgt);

struct DimTransMappings {
  DimsMapping input;   // the input's mapping with every unreachable sharding reset to -1
  DimsMapping output;  // one entry per DimTrans
};

// Paddle's InferFromDimTrans: an InputDim copies its dim's sharding; only the leftmost dim of a
// Flatten may carry its sharding (the others become unshardable); only part 0 of a Split
// inherits, and only when its size divides by the mesh dim's size; a Singleton is -1. An input
// dim whose sharding cannot reach the output is reset to -1 in `input` (reshard before the op).
DimTransMappings InferFromDimTrans(const Shape& input_shape, const DimsMapping& input_mapping,
                                   const std::vector<DimTrans>& dims, const std::vector<int64_t>& mesh_shape);

}  // namespace pdist::ir::spmd
