// JobPlan: sections per job, last uses in a micro-batch's section order, accumulated values.
#include "executor/job_plan.h"

#include <algorithm>
#include <tuple>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "ir/op_def.h"

namespace pdist::exec {
namespace {

// Where op i runs among its micro-batch's sections; the optimizer's sections come last, the
// prologue's first.
std::tuple<int, int64_t, int> SectionOrder(const ir::Operation& op, int64_t chunks, bool split) {
  switch (op.role()) {
    case ir::OpRole::kPrologue: return {-1, 0, 0};
    case ir::OpRole::kForward: return {0, op.chunk(), 0};
    case ir::OpRole::kBackward: return {1, chunks - 1 - op.chunk(), 0};
    case ir::OpRole::kBackwardWeight: return {1, chunks - 1 - op.chunk(), split ? 1 : 0};
    case ir::OpRole::kOptimizer: return {2, 0, 0};
  }
  return {2, 0, 0};
}

// Last uses in section order; values in `kept` are never freed, those in `freed_once_summed` not
// from a micro-batch's table (the step frees them there as it sums them). Micro-batch tables, the
// optimizer's table and the prologue's are separate, so each op's list frees from the table it
// runs on; what the prologue makes for the jobs (JobPlan::step_values) is in `kept`.
std::vector<std::vector<int64_t>> ReleasePlan(const ir::Program& program, int64_t chunks, bool split,
                                              const std::set<int64_t>& kept, const std::set<int64_t>& freed_once_summed) {
  const auto& ops = program.block().ops();
  std::vector<size_t> order(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return SectionOrder(*ops[a], chunks, split) < SectionOrder(*ops[b], chunks, split);
  });
  // Last user per (value, table): 0 = the micro-batch's, 1 = the optimizer's, 2 = the prologue's.
  std::map<std::pair<int64_t, int>, size_t> last;
  for (size_t i : order) {
    const int table = ops[i]->role() == ir::OpRole::kOptimizer ? 1 : ops[i]->role() == ir::OpRole::kPrologue ? 2 : 0;
    for (const ir::Value* r : ops[i]->results()) last[{r->id(), table}] = i;
    for (size_t k = 0; k < ops[i]->num_operands(); ++k) {  // a use of the type alone reads nothing
      const ir::Value* v = ops[i]->operand(k);
      if (ir::ReadsOperand(*ops[i], k) && !v->is_argument()) last[{v->id(), table}] = i;
    }
  }
  std::vector<std::vector<int64_t>> release(ops.size());
  for (const auto& [key, i] : last) {
    if (kept.count(key.first) || (key.second == 0 && freed_once_summed.count(key.first))) continue;
    release[i].push_back(key.first);
  }
  for (auto& ids : release) std::sort(ids.begin(), ids.end());
  return release;
}

}  // namespace

const std::vector<size_t>& JobPlan::OpsOf(const ir::PipelineJob& job) const {
  static const std::vector<size_t> kNone;
  auto it = ops.find({job.kind, job.kind == ir::JobKind::kOptimizer ? 0 : job.chunk});
  return it == ops.end() ? kNone : it->second;
}

JobPlan PlanJobs(const ir::Program& program, const std::vector<int64_t>& keep) {
  JobPlan plan;
  const auto& ops = program.block().ops();
  for (const auto& op : ops) plan.chunks = std::max(plan.chunks, op->chunk() + 1);
  for (size_t i = 0; i < ops.size(); ++i) {
    const ir::Operation& op = *ops[i];
    const int64_t c = op.chunk();
    switch (op.role()) {
      case ir::OpRole::kForward:
        plan.ops[{ir::JobKind::kForward, c}].push_back(i);
        break;
      case ir::OpRole::kBackward:
        plan.ops[{ir::JobKind::kBackward, c}].push_back(i);
        plan.ops[{ir::JobKind::kBackwardInput, c}].push_back(i);
        break;
      case ir::OpRole::kBackwardWeight:
        plan.ops[{ir::JobKind::kBackward, c}].push_back(i);
        plan.ops[{ir::JobKind::kBackwardWeight, c}].push_back(i);
        break;
      case ir::OpRole::kOptimizer:
        plan.ops[{ir::JobKind::kOptimizer, 0}].push_back(i);
        break;
      case ir::OpRole::kPrologue:
        plan.prologue.push_back(i);
        break;
    }
  }
  for (const auto& op : ops) {
    if (op->role() == ir::OpRole::kPrologue) continue;
    for (size_t k = 0; k < op->num_operands(); ++k) {
      const ir::Value* v = op->operand(k);
      if (v != nullptr && ir::ReadsOperand(*op, k) && v->producer() != nullptr &&
          v->producer()->role() == ir::OpRole::kPrologue) {
        plan.step_values.insert(v->id());
      }
    }
  }
  // Accumulated: made per micro-batch and read by the optimizer, or kept (the loss, fetches).
  std::set<int64_t> kept(keep.begin(), keep.end());
  if (program.loss() != nullptr) kept.insert(program.loss()->id());
  for (const ir::StateUpdate& u : program.updates()) kept.insert(u.new_value->id());
  for (const auto& op : ops) {
    for (const ir::Value* v : op->operands()) {
      if (v == nullptr || v->is_argument()) continue;
      const bool per_micro_batch = !ir::IsOncePerStepRole(v->producer()->role());
      if (op->role() == ir::OpRole::kOptimizer && per_micro_batch) plan.accumulated.insert(v->id());
    }
    for (const ir::Value* r : op->results()) {
      if (kept.count(r->id()) && !ir::IsOncePerStepRole(op->role())) plan.accumulated.insert(r->id());
    }
  }
  for (int64_t id : plan.accumulated) {
    const ir::Value* v = program.FindValue(id);
    if (!ir::IsFloatingPoint(v->type().dtype)) {
      plan.unsummable = absl::InvalidArgumentError(absl::StrCat("pipeline: %", id, " (", v->type().ToString(), ", made by ",
                                                     v->producer()->Describe(),
                                                     ") is read once per step but made per micro-batch; only "
                                                     "floating-point values can be summed over micro-batches"));
      break;
    }
  }
  // Read in their micro-batch by no op but the one that makes them.
  std::set<int64_t> read_per_micro_batch;
  for (const auto& op : ops) {
    if (op->role() == ir::OpRole::kOptimizer) continue;
    for (size_t k = 0; k < op->num_operands(); ++k) {
      if (ir::ReadsOperand(*op, k)) read_per_micro_batch.insert(op->operand(k)->id());
    }
  }
  for (int64_t id : plan.accumulated) {
    if (!kept.count(id) && !read_per_micro_batch.count(id)) plan.freed_once_summed.insert(id);
  }
  kept.insert(plan.step_values.begin(), plan.step_values.end());
  plan.release_whole = ReleasePlan(program, plan.chunks, /*split=*/false, kept, plan.freed_once_summed);
  plan.release_split = ReleasePlan(program, plan.chunks, /*split=*/true, kept, plan.freed_once_summed);
  return plan;
}

}  // namespace pdist::exec
