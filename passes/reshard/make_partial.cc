// make_partial: R → P along one mesh dim, no communication. A partial sum is the value on the
// group's first rank and zeros elsewhere; a partial average or max of equal values is the value
// itself, on every rank.
//   R → P on [2], rank 1:  %y = scale(%x) {bias = 0.0, scale = 0.0}      (rank 0: %x itself)
#include "passes/reshard/reshard_primitive.h"

namespace pdist::passes {

ReshardPrimitive MakePartialPrimitive() {
  return {.kind = ReshardStep::Kind::kMakePartial,
          .name = "make_partial",
          .phase = 2,
          .applies = [](const ir::Placement& from, const ir::Placement& to, bool) {
            return from.is_replicate() && to.is_partial();
          },
          .make = [](const ir::Placement&, const ir::Placement& to) {
            return std::pair{MakeStep(ReshardStep::Kind::kMakePartial, -1, to.reduce), to};
          },
          .lower = [](ir::Builder& b, const ReshardStep& step, ir::Value* x, int64_t rank) -> absl::StatusOr<ir::Value*> {
            if (step.reduce != ir::ReduceType::kSum || StepCoordinate(step, rank) == 0) return x;
            return b.Op1("scale", {x}, {{"scale", 0.0}, {"bias", 0.0}});
          }};
}

}  // namespace pdist::passes
