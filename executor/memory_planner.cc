// Last-use analysis and the peak-bytes estimate.
#include "executor/memory_planner.h"

#include "ir/op_def.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace pdist::exec {

MemoryPlan PlanMemory(const ir::Program& program, const std::vector<int64_t>& keep) {
  const auto& ops = program.block().ops();
  MemoryPlan plan;
  plan.release_after.resize(ops.size());

  std::unordered_set<int64_t> kept(keep.begin(), keep.end());
  if (program.loss()) kept.insert(program.loss()->id());
  for (const ir::StateUpdate& u : program.updates()) kept.insert(u.new_value->id());
  plan.kept.assign(kept.begin(), kept.end());
  std::sort(plan.kept.begin(), plan.kept.end());

  // Last op index that reads each value; a result nobody reads dies right after its producer.
  std::unordered_map<int64_t, size_t> last_use;
  for (size_t i = 0; i < ops.size(); ++i) {
    for (const ir::Value* r : ops[i]->results()) last_use[r->id()] = i;
    for (const ir::Value* v : ops[i]->operands()) {
      if (v != nullptr && !v->is_argument()) last_use[v->id()] = i;
    }
  }
  for (const auto& [id, index] : last_use) {
    if (!kept.count(id)) plan.release_after[index].push_back(id);
  }
  for (auto& ids : plan.release_after) std::sort(ids.begin(), ids.end());

  // The last reader of each argument, and where each op sits.
  std::unordered_map<int64_t, size_t> argument_last_use;
  std::unordered_map<const ir::Operation*, size_t> index_of_op;
  for (size_t i = 0; i < ops.size(); ++i) {
    index_of_op[ops[i].get()] = i;
    for (const ir::Value* v : ops[i]->operands()) {
      if (v != nullptr && v->is_argument()) argument_last_use[v->id()] = i;
    }
  }
  plan.install_after.resize(ops.size());
  const std::unordered_set<int64_t> fetched(keep.begin(), keep.end());
  for (size_t u = 0; u < program.updates().size(); ++u) {
    const ir::StateUpdate& update = program.updates()[u];
    if (update.new_value->is_argument() || fetched.count(update.state->id())) continue;
    size_t at = index_of_op.at(update.new_value->producer());
    if (auto last = argument_last_use.find(update.state->id()); last != argument_last_use.end()) {
      at = std::max(at, last->second);
    }
    // Only in the optimizer's ops: a micro-batch's table binds the workspace when its first
    // job runs, so a state changed during the forward or backward would reach later ones. Not a
    // collective's result (ZeRO's gathered parameters): it comes from the communication stream,
    // and waiting for it there would stall the compute stream.
    if (ops[at]->role() != ir::OpRole::kOptimizer) continue;
    const ir::OpDef* maker = ir::OpRegistry::Global().Find(update.new_value->producer()->type());
    if (maker != nullptr && maker->collective != ir::CollectiveKind::kNone) continue;
    plan.install_after[at].push_back(u);
  }

  int64_t live = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    for (const ir::Value* r : ops[i]->results()) live += r->type().num_bytes();
    plan.estimated_peak_bytes = std::max(plan.estimated_peak_bytes, live);
    for (int64_t id : plan.release_after[i]) live -= program.FindValue(id)->type().num_bytes();
    // Installed, a new value is persistent, like the state it replaces.
    for (size_t u : plan.install_after[i]) live -= program.updates()[u].new_value->type().num_bytes();
  }
  return plan;
}

}  // namespace pdist::exec
