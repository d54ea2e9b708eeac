// ShardTensor: the user's annotation of one value (Paddle's shard_tensor / DTensor's
// distribute_tensor), which completion then propagates to every other value.
//
//   ProcessMesh mesh = ProcessMesh::Range({2, 2}, {"dp", "mp"});
//   PDIST_RETURN_IF_ERROR(ShardTensor(w, mesh, {Placement::Replicate(), Placement::Shard(1)}));
//   // w prints as  f32[64,256] dist! {mesh: [2,2] [dp,mp], dims_mapping: [-1,1]}
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "ir/dist/placement.h"
#include "ir/dist/process_mesh.h"
#include "ir/program.h"

namespace pdist::ir {

// Sets `value`'s DistAttr from one placement per mesh dim and marks it annotated (completion
// never changes it). InvalidArgument naming the value and the placement when the placements do
// not fit: a count other than the mesh's ndim, a Shard(d) beyond the tensor's rank (negative d
// counts from the end), a tensor dim sharded twice. The value is unchanged on error.
absl::Status ShardTensor(Value* value, const ProcessMesh& mesh, const std::vector<Placement>& placements);

// Whether any value of `program` carries a DistAttr of its own (ShardTensor's, or a model file's):
// such a program names its ranks itself.
bool HasPlacements(const Program& program);

// 1 + the highest process id of any value's mesh in `program` (1 when none has a DistAttr): the
// ranks its placements name.
int64_t RanksNamedBy(const Program& program);

// "w" for a named value (a block argument), "value id 7" otherwise — for messages.
std::string DescribeValue(const Value& value);

}  // namespace pdist::ir
