// remesh: the same pieces said on another mesh over the same processes, one of whose dims splits
// a dim of the other (ir/dist/remesh.h). No communication and no op: hybrid sharded data
// parallelism moves gradients and parameters between the mesh with dp whole and the mesh with
// dp split into replicas × shards this way. The planner puts it before the steps on the target
// mesh, or after those on the source mesh.
//   P on [4] [dp] → P,P on [2,2] [dp_replica,dp_shard]:  "P → PP@2x2"  (rank r keeps %x)
#include "passes/reshard/reshard_primitive.h"

namespace pdist::passes {

ReshardPrimitive RemeshPrimitive() {
  return {.kind = ReshardStep::Kind::kRemesh,
          .name = "remesh",
          .phase = 0,
          .lower = [](ir::Builder&, const ReshardStep&, ir::Value* x, int64_t) -> absl::StatusOr<ir::Value*> { return x; }};
}

}  // namespace pdist::passes
