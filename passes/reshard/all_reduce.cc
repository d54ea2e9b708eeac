// all_reduce: P → R along one mesh dim. Every rank of the group gets the reduction of the
// group's pieces. Taken when the Partial cannot reduce-scatter into its target.
//   P → R on [2]:  %y = c_allreduce(%x) {ranks = [0, 1], reduce = "sum"}
#include "passes/reshard/reshard_primitive.h"

namespace pdist::passes {

ReshardPrimitive AllReducePrimitive() {
  return {.kind = ReshardStep::Kind::kAllReduce,
          .name = "all_reduce",
          .phase = 1,
          .applies = [](const ir::Placement& from, const ir::Placement&, bool) { return from.is_partial(); },
          .make = [](const ir::Placement& from, const ir::Placement&) {
            return std::pair{MakeStep(ReshardStep::Kind::kAllReduce, -1, from.reduce), ir::Placement::Replicate()};
          },
          .lower = [](ir::Builder& b, const ReshardStep& step, ir::Value* x, int64_t rank) {
            return b.Op1("c_allreduce", {x}, {{"reduce", ir::ReduceTypeName(step.reduce)},
                                              {"ranks", StepGroup(step, rank)}});
          }};
}

}  // namespace pdist::passes
