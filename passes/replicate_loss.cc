// ReplicateLoss: a final reshard of the loss to Replicate on the whole world.
#include "passes/replicate_loss.h"

#include "ir/builder.h"
#include "ir/dist/process_mesh.h"
#include "ir/status.h"

namespace pdist::passes {

absl::StatusOr<bool> ReplicateLoss(ir::Program& program, int64_t world_size) {
  ir::Value* loss = program.loss();
  if (loss == nullptr || !loss->dist_attr()) return false;
  const bool everywhere = loss->dist_attr()->mesh.size() == world_size;
  if (everywhere && !loss->dist_attr()->is_partial()) return false;
  ir::Builder b(&program);
  b.set_op_role(ir::OpRole::kOptimizer);
  PDIST_ASSIGN_OR_RETURN(ir::Value * whole, b.Op1("reshard", {loss}));
  ir::DistAttr target = *loss->dist_attr();
  target.partial.clear();
  if (!everywhere) target = ir::DistAttr::Replicated(ir::ProcessMesh::Range({world_size}, {"world"}), loss->type().rank());
  whole->set_dist_attr(std::move(target));
  program.set_loss(whole);
  return true;
}

}  // namespace pdist::passes
