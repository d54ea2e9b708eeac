// all_gather: S(d) → R along one mesh dim: the group's slices concatenated along d. Taken when
// the shard cannot move to its target dim by an all-to-all.
//   S(0) → R on [2]:  %y = c_allgather(%x) {axis = 0, ranks = [0, 1]}
#include "passes/reshard/reshard_primitive.h"

namespace pdist::passes {

ReshardPrimitive AllGatherPrimitive() {
  return {.kind = ReshardStep::Kind::kAllGather,
          .name = "all_gather",
          .phase = 1,
          .applies = [](const ir::Placement& from, const ir::Placement&, bool) { return from.is_shard(); },
          .make = [](const ir::Placement& from, const ir::Placement&) {
            return std::pair{MakeStep(ReshardStep::Kind::kAllGather, from.dim), ir::Placement::Replicate()};
          },
          .lower = [](ir::Builder& b, const ReshardStep& step, ir::Value* x, int64_t rank) {
            return b.Op1("c_allgather", {x}, {{"axis", step.tensor_dim}, {"ranks", StepGroup(step, rank)}});
          }};
}

}  // namespace pdist::passes
