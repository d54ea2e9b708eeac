// all_to_all: S(d) → S(d') along one mesh dim, when no other mesh dim shards d': each rank
// sends the group the d'-slices of its d-slice, and concatenates what it receives along d.
//   S(0) → S(1) on [2]:  %y = c_alltoall(%x) {concat_axis = 0, ranks = [0, 1], split_axis = 1}
#include "passes/reshard/reshard_primitive.h"

namespace pdist::passes {

ReshardPrimitive AllToAllPrimitive() {
  return {.kind = ReshardStep::Kind::kAllToAll,
          .name = "all_to_all",
          .phase = 1,
          .applies = [](const ir::Placement& from, const ir::Placement&, bool to_dim_free) {
            return from.is_shard() && to_dim_free;
          },
          .make = [](const ir::Placement& from, const ir::Placement& to) {
            return std::pair{MakeStep(ReshardStep::Kind::kAllToAll, to.dim, ir::ReduceType::kSum, from.dim), to};
          },
          .lower = [](ir::Builder& b, const ReshardStep& step, ir::Value* x, int64_t rank) {
            return b.Op1("c_alltoall", {x}, {{"split_axis", step.tensor_dim},
                                             {"concat_axis", step.from_tensor_dim},
                                             {"ranks", StepGroup(step, rank)}});
          }};
}

}  // namespace pdist::passes
