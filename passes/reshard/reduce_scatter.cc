// reduce_scatter: P → S(d) along one mesh dim, when no other mesh dim shards d: each rank gets
// its slice of the reduction, moving half the bytes of an all-reduce followed by a slice.
//   P → S(0) on [2]:  %y = c_reduce_scatter(%x) {axis = 0, reduce = "sum", ranks = [0, 1]}
#include "passes/reshard/reshard_primitive.h"

namespace pdist::passes {

ReshardPrimitive ReduceScatterPrimitive() {
  return {.kind = ReshardStep::Kind::kReduceScatter,
          .name = "reduce_scatter",
          .phase = 1,
          .applies = [](const ir::Placement& from, const ir::Placement&, bool to_dim_free) {
            return from.is_partial() && to_dim_free;
          },
          .make = [](const ir::Placement& from, const ir::Placement& to) {
            return std::pair{MakeStep(ReshardStep::Kind::kReduceScatter, to.dim, from.reduce), to};
          },
          .lower = [](ir::Builder& b, const ReshardStep& step, ir::Value* x, int64_t rank) {
            return b.Op1("c_reduce_scatter", {x}, {{"axis", step.tensor_dim},
                                                   {"reduce", ir::ReduceTypeName(step.reduce)},
                                                   {"ranks", StepGroup(step, rank)}});
          }};
}

}  // namespace pdist::passes
