// Einsum-notation helpers shared by the SPMD rules (Paddle's spmd_rules/utils, DTensor's
// einsum strategies): each tensor axis is a letter; shardings of the same letter are merged
// across tensors; a sharded letter missing from an output makes that output Partial.
//
//   AxisShardings m = MergeAxisShardings({{"mk", {1, 0}}, {"kn", {-1, -1}}});  // m: k→0, m→1
//   MappingForAxes("mn", m)              // [1, -1]
//   PartialForMissingAxes("mn", m)       // {0: sum}   (k is contracted)
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ir/dist/dist_attr.h"
#include "ir/types.h"

namespace pdist::ir::spmd {

// Axis letter → mesh dim.
using AxisShardings = std::map<char, int64_t>;

// Merges the shardings of every (axes, dims_mapping) pair, in order. Per letter: -1 merges with
// anything; two different mesh dims on one letter keep the first seen. Then, when one mesh dim
// would shard two letters, the letter seen first keeps it and the others become replicated
// (Paddle's ShardingMergeForTensors). The letter '1' is a size-1 axis and never sharded.
AxisShardings MergeAxisShardings(const std::vector<std::pair<std::string, DimsMapping>>& tensors);

// The mapping of `axes` under `shardings`; '1' and unknown letters are -1.
DimsMapping MappingForAxes(const std::string& axes, const AxisShardings& shardings);

// Mesh dims that shard a letter absent from `out_axes`: the output is Partial on them.
PartialDims PartialForMissingAxes(const std::string& out_axes, const AxisShardings& shardings,
                                  ReduceType reduce = ReduceType::kSum);

// Letters for `rank` axes right-aligned against `max_rank` broadcast axes, drawn from
// `alphabet` (which leaves out letters a rule reserves, e.g. m, k, n for matmul).
std::string BroadcastAxes(int64_t rank, int64_t max_rank, const std::string& alphabet = "abcdefghijlopqrstuvwxyz");

// Sets -1 on the given tensor dims of `mapping`.
DimsMapping Unshard(DimsMapping mapping, const std::vector<int64_t>& dims);

// One tensor as AlignAxisShardings sees it: letters, global shape, current mapping.
struct AxesTensor {
  std::string axes;
  Shape shape;
  DimsMapping dims_mapping;
};

// Paddle's AlignDimsSharding (concat, norm grads): for each mesh dim in turn, among the letters
// some tensor shards on it, picks the one cheapest to align every tensor to — cost Σ over tensors
// holding the letter but not sharded on it by that mesh dim of (local numel × mesh dim size); a
// letter smaller than the mesh dim is never picked; ties go to the letter seen first; a letter
// already picked for an earlier mesh dim is skipped. Letters only in `exclude` stay unsharded.
//
//   mesh [2,2], "abc" x3: [-1,0,1], [-1,1,0], [-1,-1,0]  →  b→1, c→0   (all become [-1,1,0])
AxisShardings AlignAxisShardings(const std::vector<AxesTensor>& tensors, const std::vector<int64_t>& mesh_shape,
                                 const std::string& exclude = "");

}  // namespace pdist::ir::spmd
