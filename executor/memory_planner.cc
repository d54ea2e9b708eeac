// Last-use analysis and the peak-bytes estimate.
#include "executor/memory_planner.h"

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

  int64_t live = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    for (const ir::Value* r : ops[i]->results()) live += r->type().num_bytes();
    plan.estimated_peak_bytes = std::max(plan.estimated_peak_bytes, live);
    for (int64_t id : plan.release_after[i]) live -= program.FindValue(id)->type().num_bytes();
  }
  return plan;
}

}  // namespace pdist::exec
