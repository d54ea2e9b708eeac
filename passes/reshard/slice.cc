// slice: R → S(d) along one mesh dim, no communication: each rank keeps its piece.
//   R → S(0) of f32[8,4] on [2], rank 1:  %y = slice(%x) {axes = [0], ends = [8], starts = [4]}
#include "passes/reshard/reshard_primitive.h"

namespace pdist::passes {

ReshardPrimitive SlicePrimitive() {
  return {.kind = ReshardStep::Kind::kSlice,
          .name = "slice",
          .phase = 2,
          .applies = [](const ir::Placement& from, const ir::Placement& to, bool) {
            return from.is_replicate() && to.is_shard();
          },
          .make = [](const ir::Placement&, const ir::Placement& to) {
            return std::pair{MakeStep(ReshardStep::Kind::kSlice, to.dim), to};
          },
          .lower = [](ir::Builder& b, const ReshardStep& step, ir::Value* x, int64_t rank) {
            const int64_t size =
                x->type().shape[static_cast<size_t>(step.tensor_dim)] / step.after.mesh.dim_size(step.mesh_dim);
            const int64_t start = StepCoordinate(step, rank) * size;
            return b.Op1("slice", {x}, {{"axes", std::vector<int64_t>{step.tensor_dim}},
                                        {"starts", std::vector<int64_t>{start}},
                                        {"ends", std::vector<int64_t>{start + size}}});
          }};
}

}  // namespace pdist::passes
