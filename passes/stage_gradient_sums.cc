// SumStageGradientsOncePerStep: the add tree of a parameter's gradient, and the moves between
// meshes that feed it, given the optimizer role.
#include "passes/stage_gradient_sums.h"

#include <unordered_set>
#include <vector>

#include "ir/pipeline_job.h"
#include "passes/dist_state.h"
#include "passes/uses.h"

namespace pdist::passes {
namespace {

// A reshard whose result lives on other processes than its operand: a pipeline send.
bool MovesBetweenMeshes(const ir::Operation& op) {
  if (!IsReshard(op) || op.num_operands() != 1 || op.operand(0) == nullptr) return false;
  const ir::Value& x = *op.operand(0);
  const ir::Value& y = *op.result(0);
  return x.dist_attr() && y.dist_attr() && x.dist_attr()->mesh.process_ids() != y.dist_attr()->mesh.process_ids();
}

// The backward adds that make `gradient` and the moves between meshes feeding them.
struct SumTree {
  std::vector<ir::Operation*> ops;
  bool has_move = false;
};

// Only gradients are followed: an add that mixes in anything else (a weight decay term read from
// a parameter) would be summed once per step instead of once per micro-batch.
void CollectSumTree(ir::Value* v, SumTree& tree) {
  ir::Operation* op = v->producer();
  if (op == nullptr || !IsBackwardRole(op->role()) || v->role() != ir::ValueRole::kGradient) return;
  if (MovesBetweenMeshes(*op)) {
    tree.ops.push_back(op);
    tree.has_move = true;
    return;
  }
  if (op->type() != "add") return;
  for (const ir::Value* operand : op->operands()) {
    if (operand == nullptr || operand->role() != ir::ValueRole::kGradient) return;
  }
  tree.ops.push_back(op);
  for (ir::Value* operand : op->operands()) {
    if (operand != nullptr) CollectSumTree(operand, tree);
  }
}

// Every reader of the tree's results is in the tree or an optimizer op: nothing of the
// micro-batch's own jobs waits for them.
bool OnlyTheOptimizerReads(const SumTree& tree, const Uses& uses) {
  const std::unordered_set<const ir::Operation*> in_tree(tree.ops.begin(), tree.ops.end());
  for (const ir::Operation* op : tree.ops) {
    auto it = uses.find(op->result(0));
    if (it == uses.end()) continue;
    for (const Use& use : it->second) {
      if (!in_tree.count(use.op) && use.op->role() != ir::OpRole::kOptimizer) return false;
    }
  }
  return true;
}

}  // namespace

absl::StatusOr<int64_t> SumStageGradientsOncePerStep(ir::Program& program) {
  const Uses uses = UsesOf(program);
  int64_t moved = 0;
  for (const ir::StateUpdate& g : program.gradients()) {
    SumTree tree;
    CollectSumTree(g.new_value, tree);
    if (!tree.has_move || !OnlyTheOptimizerReads(tree, uses)) continue;
    for (ir::Operation* op : tree.ops) {
      op->set_role(ir::OpRole::kOptimizer);
      op->set_chunk(0);
    }
    ++moved;
  }
  return moved;
}

}  // namespace pdist::passes
