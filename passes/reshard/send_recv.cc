// send_recv: the move of a tensor to another mesh (a pipeline stage boundary). The planner puts
// it between the steps on the source mesh and those on the target (PlanAcrossMeshes); partition
// lowers it with both ends at once — c_send in the job that made the tensor, c_recv in the job
// that first reads it — so it has no per-rank lowering here.
//   S(0) on [2] ids [0,1] → S(0) on [2] ids [2,3], rank 0:  c_send(%x) {peer = 2, tag = 1}
#include "passes/reshard/reshard_primitive.h"

namespace pdist::passes {

ReshardPrimitive SendRecvPrimitive() {
  return {.kind = ReshardStep::Kind::kSendRecv, .name = "send_recv", .phase = 0};
}

}  // namespace pdist::passes
