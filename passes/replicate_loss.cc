// ReplicateLoss, ReplicateOutputs: a final reshard of each to Replicate on the whole world.
#include "passes/replicate_loss.h"

#include "ir/builder.h"
#include "ir/dist/process_mesh.h"
#include "ir/status.h"

namespace pdist::passes {
namespace {

// `v` whole on all `world_size` ranks: itself when it is, else an appended reshard's result
// (role optimizer: the step's epilogue, after every micro-batch).
absl::StatusOr<ir::Value*> Replicated(ir::Program& program, ir::Value* v, int64_t world_size) {
  if (!v->dist_attr()) return v;
  const ir::DistAttr& attr = *v->dist_attr();
  const bool everywhere = attr.mesh.size() == world_size;
  if (everywhere && attr.is_replicated()) return v;
  ir::Builder b(&program);
  b.set_op_role(ir::OpRole::kOptimizer);
  PDIST_ASSIGN_OR_RETURN(ir::Value * whole, b.Op1("reshard", {v}));
  whole->set_dist_attr(ir::DistAttr::Replicated(
      everywhere ? attr.mesh : ir::ProcessMesh::Range({world_size}, {"world"}), v->type().rank()));
  return whole;
}

}  // namespace

absl::StatusOr<bool> ReplicateLoss(ir::Program& program, int64_t world_size) {
  ir::Value* loss = program.loss();
  if (loss == nullptr) return false;
  PDIST_ASSIGN_OR_RETURN(ir::Value * whole, Replicated(program, loss, world_size));
  program.set_loss(whole);
  return whole != loss;
}

absl::StatusOr<int64_t> ReplicateOutputs(ir::Program& program, int64_t world_size) {
  int64_t appended = 0;
  for (ir::ProgramOutput& o : program.mutable_outputs()) {
    PDIST_ASSIGN_OR_RETURN(ir::Value * whole, Replicated(program, o.value, world_size));
    if (whole != o.value) ++appended;
    o.value = whole;
  }
  return appended;
}

}  // namespace pdist::passes
