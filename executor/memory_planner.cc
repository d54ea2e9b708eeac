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

  // Last op index that reads each value (arguments included), and the op that makes each result;
  // a result nobody reads dies right after its producer. Arguments are never freed: they are the
  // workspace's (their last reader decides when an update may replace them, below). A use of
  // the type alone (ir::OpDef::type_only_operands: add_grad's x and y) reads nothing.
  std::unordered_map<int64_t, size_t> last_use, made_at;
  for (size_t i = 0; i < ops.size(); ++i) {
    for (const ir::Value* r : ops[i]->results()) last_use[r->id()] = made_at[r->id()] = i;
    for (size_t k = 0; k < ops[i]->num_operands(); ++k) {
      if (ir::ReadsOperand(*ops[i], k)) last_use[ops[i]->operand(k)->id()] = i;
    }
  }
  for (const auto& [id, index] : last_use) {
    if (!kept.count(id) && made_at.count(id)) plan.release_after[index].push_back(id);
  }
  for (auto& ids : plan.release_after) std::sort(ids.begin(), ids.end());

  plan.install_after.resize(ops.size());
  for (size_t u = 0; u < program.updates().size(); ++u) {
    const ir::StateUpdate& update = program.updates()[u];
    if (update.new_value->is_argument() || kept.count(update.state->id())) continue;  // fetched
    size_t at = made_at.at(update.new_value->id());
    if (auto last = last_use.find(update.state->id()); last != last_use.end()) at = std::max(at, last->second);
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
