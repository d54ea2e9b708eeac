// The reshard primitives, one line each, in the planner's order of preference: within phase 1
// a reduce-scatter straight into a free target shard beats an all-reduce (half the bytes), an
// all-to-all beats an all-gather followed by a slice.
#include <cstdlib>

#include "passes/reshard/reshard_primitive.h"

namespace pdist::passes {

const std::vector<ReshardPrimitive>& ReshardPrimitives() {
  static const std::vector<ReshardPrimitive>* primitives = new std::vector<ReshardPrimitive>{
      ReduceScatterPrimitive(), AllReducePrimitive(), AllToAllPrimitive(), AllGatherPrimitive(),
      SlicePrimitive(),         MakePartialPrimitive(), SendRecvPrimitive(),   RemeshPrimitive(),
  };
  return *primitives;
}

const ReshardPrimitive& ReshardPrimitiveOf(ReshardStep::Kind kind) {
  for (const ReshardPrimitive& p : ReshardPrimitives()) {
    if (p.kind == kind) return p;
  }
  std::abort();  // every Kind has a primitive (reshard_plan_test checks it): a programmer error
}

std::vector<int64_t> StepGroup(const ReshardStep& step, int64_t rank) {
  return step.after.mesh.GroupAlong({step.mesh_dim}, rank);
}

int64_t StepCoordinate(const ReshardStep& step, int64_t rank) {
  return step.after.mesh.CoordinateOf(rank)[static_cast<size_t>(step.mesh_dim)];
}

ReshardStep MakeStep(ReshardStep::Kind kind, int64_t tensor_dim, ir::ReduceType reduce, int64_t from_tensor_dim) {
  ReshardStep step;
  step.kind = kind;
  step.tensor_dim = tensor_dim;
  step.from_tensor_dim = from_tensor_dim;
  step.reduce = reduce;
  return step;
}

}  // namespace pdist::passes
