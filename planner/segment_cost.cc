#include "planner/segment_cost.h"

#include <algorithm>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "ir/attribute.h"
#include "ir/status.h"
#include "planner/comm_cost.h"
#include "ir/op_def.h"
#include "ir/pipeline_job.h"
#include "planner/compute_cost.h"

namespace pdist::planner {
namespace {

size_t Index(ir::OpRole role) { return SegmentCost::Slot(role); }


// The collective an op performs (OpDef::collective) and the bytes the alpha–beta formula takes
// (the whole tensor: the gathered result, the scattered input); nullopt for other ops.
std::optional<std::pair<Collective, double>> CollectiveOf(const ir::Operation& op) {
  const ir::OpDef* def = ir::OpRegistry::Global().Find(op.type());
  if (def == nullptr || def->collective == ir::CollectiveKind::kNone) return std::nullopt;
  auto bytes = [](const std::vector<ir::Value*>& values) {
    double sum = 0;
    for (const ir::Value* v : values) sum += v != nullptr ? static_cast<double>(v->type().num_bytes()) : 0;
    return sum;
  };
  switch (def->collective) {
    case ir::CollectiveKind::kAllReduce: return std::pair{Collective::kAllReduce, bytes(op.operands())};
    case ir::CollectiveKind::kAllGather: return std::pair{Collective::kAllGather, bytes(op.results())};
    case ir::CollectiveKind::kReduceScatter: return std::pair{Collective::kReduceScatter, bytes(op.operands())};
    case ir::CollectiveKind::kAllToAll: return std::pair{Collective::kAllToAll, bytes(op.operands())};
    case ir::CollectiveKind::kNone: break;
  }
  return std::nullopt;
}

// The op type whose calibrated scale applies: a local form's base (c_embedding → embedding).
std::string ScaledAs(const std::string& type) {
  const ir::OpDef* def = ir::OpRegistry::Global().Find(type);
  return def != nullptr && !def->local_form_of.empty() ? def->local_form_of : type;
}

}  // namespace

SegmentCost& SegmentCost::operator+=(const SegmentCost& o) {
  for (size_t i = 0; i < seconds.size(); ++i) {
    seconds[i] += o.seconds[i];
    mp_comm_seconds[i] += o.mp_comm_seconds[i];
  }
  flops += o.flops;
  model_flops += o.model_flops;
  param_bytes += o.param_bytes;
  param_elements += o.param_elements;
  grad_bytes += o.grad_bytes;
  optimizer_state_bytes += o.optimizer_state_bytes;
  saved_bytes += o.saved_bytes;
  recomputable_seconds += o.recomputable_seconds;
  boundary_bytes += o.boundary_bytes;
  step_value_bytes += o.step_value_bytes;
  step_sum_bytes += o.step_sum_bytes;
  unfused_attention_bytes += o.unfused_attention_bytes;
  backward_excess_bytes = std::max(backward_excess_bytes, o.backward_excess_bytes);  // one segment's backward at a time
  backward_excess_with_grads_bytes = std::max(backward_excess_with_grads_bytes, o.backward_excess_with_grads_bytes);
  largest_update_bytes = std::max(largest_update_bytes, o.largest_update_bytes);
  backward_excess_accumulating_bytes =
      std::max(backward_excess_accumulating_bytes, o.backward_excess_accumulating_bytes);
  return *this;
}

SegmentCost& SegmentCost::operator*=(double k) {
  for (size_t i = 0; i < seconds.size(); ++i) {
    seconds[i] *= k;
    mp_comm_seconds[i] *= k;
  }
  for (double* f : {&flops, &model_flops, &param_bytes, &param_elements, &grad_bytes, &optimizer_state_bytes, &saved_bytes,
                    &recomputable_seconds, &boundary_bytes, &step_value_bytes, &step_sum_bytes,
                    &unfused_attention_bytes}) {
    *f *= k;
  }
  return *this;
}

namespace {

// The storage behind each value of a program walked in order: a view's result (ir::OpDef::view)
// and a result that is one of its operands (ir::OpDef::aliases_if_same_type: add_grad's x_grad
// when x was not broadcast) are that operand's storage, every other value its own.
class ViewStorage {
 public:
  // Call for each op in program order, before asking about its results. Results in
  // `own_storage` keep their own (parameter gradients, which the walks price apart: as an
  // activation gradient's storage they would keep it alive through the optimizer).
  void Note(const ir::Operation& op, const std::unordered_set<const ir::Value*>* own_storage = nullptr) {
    for (size_t r = 0; r < op.num_results(); ++r) {
      if (own_storage != nullptr && own_storage->count(op.result(r)) != 0) continue;
      if (std::optional<size_t> k = ir::AliasedOperand(op, r)) storage_of_[op.result(r)] = Of(op.operand(*k));
      if (auto it = written_over_.find(op.result(r)); it != written_over_.end()) storage_of_[op.result(r)] = Of(it->second);
    }
  }
  // Result `r` is written over `operand`'s storage (ir::OpDef::overwrites_dying_operand, where
  // the operand dies at r's op): noted before the walk that calls Note.
  void WrittenOver(const ir::Value* r, const ir::Value* operand) { written_over_[r] = operand; }
  bool IsWrittenOver(const ir::Value* r) const { return written_over_.count(r) != 0; }
  const ir::Value* Of(const ir::Value* v) const {
    auto it = storage_of_.find(v);
    return it == storage_of_.end() ? v : it->second;
  }

 private:
  std::unordered_map<const ir::Value*, const ir::Value*> storage_of_;
  std::unordered_map<const ir::Value*, const ir::Value*> written_over_;
};

// Per storage (ViewStorage::Of), the last op that reads it.
std::unordered_map<const ir::Value*, size_t> LastUses(const std::vector<std::unique_ptr<ir::Operation>>& ops,
                                                      ViewStorage& storage,
                                                      const std::unordered_set<const ir::Value*>& own_storage) {
  std::unordered_map<const ir::Value*, size_t> last_use;
  for (size_t i = 0; i < ops.size(); ++i) {
    for (size_t k = 0; k < ops[i]->num_operands(); ++k) {  // a use of the type alone reads nothing
      if (ir::ReadsOperand(*ops[i], k)) last_use[storage.Of(ops[i]->operand(k))] = i;
    }
    storage.Note(*ops[i], &own_storage);
  }
  return last_use;
}

// The most bytes the backward holds at once beyond the forward values it starts with, walked op
// by op as the executor frees (after each value's last reader): activation gradients and
// recompute's replays appear while the saved values they read go. A view's result, or a result
// that is its operand (ViewStorage), is the operand's storage, alive while either is read. The
// parameter gradients are grad_bytes, priced by the caller; `with_grads` is the same peak with
// the gradients made so far counted at each op, `accumulating` with twice what each op makes
// of them (a later micro-batch's: the fresh gradient and its new sum, before the old goes).
struct BackwardWalk {
  double excess = 0, with_grads = 0, accumulating = 0;
};

BackwardWalk WalkBackward(const ir::Program& local) {
  const auto& ops = local.block().ops();
  std::unordered_set<const ir::Value*> parameter_gradients;
  for (const ir::StateUpdate& g : local.gradients()) parameter_gradients.insert(g.new_value);
  // A result its kernels write over an operand that dies at its op (the executor's donation,
  // Executor::Donations) shares that operand's storage: found on the last uses without any,
  // then the last uses again with them.
  ViewStorage storage;
  {
    ViewStorage plain;
    const std::unordered_map<const ir::Value*, size_t> last = LastUses(ops, plain, parameter_gradients);
    ViewStorage walk;
    for (size_t i = 0; i < ops.size(); ++i) {
      for (const auto& [r, k] : ir::OverwritableOperands(*ops[i])) {
        const ir::Value* operand = walk.Of(ops[i]->operand(k));
        auto it = last.find(operand);
        if (!operand->is_argument() && it != last.end() && it->second == i &&
            parameter_gradients.count(ops[i]->result(r)) == 0) {
          storage.WrittenOver(ops[i]->result(r), operand);
        }
      }
      walk.Note(*ops[i], &parameter_gradients);
    }
  }
  const std::unordered_map<const ir::Value*, size_t> last_use = LastUses(ops, storage, parameter_gradients);
  std::unordered_map<const ir::Value*, double> held;
  double live = 0, at_backward = -1, peak = 0, grads_made = 0, peak_with_grads = 0, peak_accumulating = 0;
  auto release = [&](const ir::Value* v) {
    if (auto it = held.find(v); it != held.end()) {
      live -= it->second;
      held.erase(it);
    }
  };
  for (size_t i = 0; i < ops.size(); ++i) {
    const ir::Operation& op = *ops[i];
    if (op.role() == ir::OpRole::kOptimizer) break;
    if (ir::IsBackwardRole(op.role()) && at_backward < 0) at_backward = peak = peak_with_grads = peak_accumulating = live;
    double grads_now = 0;  // what this op makes of the parameter gradients
    for (size_t j = 0; j < op.num_results(); ++j) {
      const ir::Value* r = op.result(j);
      if (r != nullptr && parameter_gradients.count(r) != 0) grads_now += static_cast<double>(r->type().num_bytes());
      if (r == nullptr || parameter_gradients.count(r) != 0 || ir::AliasedOperand(op, j) || storage.IsWrittenOver(r)) {
        continue;
      }
      held[r] = static_cast<double>(r->type().num_bytes());
      live += held[r];
    }
    grads_made += grads_now;
    if (at_backward >= 0) {
      peak = std::max(peak, live);
      peak_with_grads = std::max(peak_with_grads, live + grads_made);
      peak_accumulating = std::max(peak_accumulating, live + 2 * grads_now);
    }
    for (size_t k = 0; k < op.num_operands(); ++k) {
      const ir::Value* v = op.operand(k);
      if (ir::ReadsOperand(op, k) && last_use.at(storage.Of(v)) == i) release(storage.Of(v));
    }
    for (const ir::Value* r : op.results()) {
      if (r != nullptr && last_use.count(r) == 0) release(r);  // never read: freed at once
    }
  }
  if (at_backward < 0) return {};
  return {.excess = peak - at_backward,
          .with_grads = peak_with_grads - at_backward,
          .accumulating = peak_accumulating - at_backward};
}

}  // namespace

absl::StatusOr<SegmentCost> PriceLocalProgram(const ir::Program& local, const strategy::Cluster& cluster,
                                              std::map<std::string, double>* unscaled_by_type) {
  const std::map<std::string, double>& op_scale = cluster.device.efficiency.op_scale;
  SegmentCost cost;
  for (const ir::Value* arg : local.block().arguments()) {
    const double bytes = static_cast<double>(arg->type().num_bytes());
    if (arg->role() == ir::ValueRole::kParameter) {
      cost.param_bytes += bytes;
      cost.param_elements += static_cast<double>(arg->type().num_elements());
    }
    if (arg->role() == ir::ValueRole::kOptimizerState) cost.optimizer_state_bytes += bytes;
  }
  for (const ir::StateUpdate& g : local.gradients()) cost.grad_bytes += static_cast<double>(g.new_value->type().num_bytes());

  // Saved storage: a view's result (ir::OpDef::view: the attention's output reshaped for its
  // projection) is its operand's bytes, counted once however many backward ops read either.
  std::set<const ir::Value*> saved;
  ViewStorage storage;
  for (const auto& op : local.block().ops()) {
    const size_t role = Index(op->role());
    storage.Note(*op);
    if (op->type() == "c_send" || op->type() == "c_recv") {
      if (op->type() == "c_send" && op->role() == ir::OpRole::kForward) {
        cost.boundary_bytes += static_cast<double>(op->operand(0)->type().num_bytes());
      }
      if (op->type() == "c_recv" && op->role() == ir::OpRole::kPrologue) {
        cost.step_value_bytes += static_cast<double>(op->result(0)->type().num_bytes());
      }
      const ir::Operation* sum = op->type() == "c_send" ? op->operand(0)->producer() : nullptr;
      if (op->role() == ir::OpRole::kOptimizer && sum != nullptr && ir::IsBackwardRole(sum->role())) {
        cost.step_sum_bytes += static_cast<double>(op->operand(0)->type().num_bytes());
      }
      continue;
    }
    if (auto collective = CollectiveOf(*op)) {
      PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> ranks, ir::GetIntList(op->attrs(), "ranks"));
      std::vector<int64_t> group;  // the same number of devices, counted from the node's first
      for (int64_t d = 0; d < static_cast<int64_t>(ranks.size()); ++d) group.push_back(d);
      const double t = CollectiveSeconds(cluster, collective->first, collective->second, group);
      cost.seconds[role] += t;
      cost.mp_comm_seconds[role] += t;
      continue;
    }
    PDIST_ASSIGN_OR_RETURN(ir::OpCost registered, CostOf(*op));
    const ir::OpCost op_cost = AsTheDeviceRunsIt(*op, registered, cluster.device.efficiency);
    const ir::DataType dtype = ComputeDtype(*op);
    absl::StatusOr<double> t =
        ComputeSeconds(cluster.device, dtype, op_cost, FusedAttentionOf(*op, cluster.device.efficiency));
    if (!t.ok()) return WithContext(t.status(), absl::StrCat("pricing ", op->Describe()));
    if (unscaled_by_type != nullptr) (*unscaled_by_type)[OpScaleKey(op->type(), dtype)] += *t;
    *t *= OpScaleOf(op_scale, ScaledAs(op->type()), dtype);
    cost.seconds[role] += *t;
    if (op->role() == ir::OpRole::kOptimizer) {
      double made = 0;
      for (const ir::Value* r : op->results()) made += static_cast<double>(r->type().num_bytes());
      cost.largest_update_bytes = std::max(cost.largest_update_bytes, made);
    } else {
      cost.flops += op_cost.flops;
      cost.model_flops += op_cost.ModelFlops();
    }
    // What selective recompute replays (passes/recompute.h): every forward op but the compute-bound ones.
    const ir::OpDef* def = ir::OpRegistry::Global().Find(op->type());
    if (op->role() == ir::OpRole::kForward && (def == nullptr || !def->compute_bound)) {
      cost.recomputable_seconds += *t;
    } else if (op->role() == ir::OpRole::kForward && op_cost.bytes != registered.bytes) {
      // An unfused attention core keeps its softmax output, dropout mask and dropout output for
      // the backward (Korthikanti et al.'s 5·a·s²·b bytes); selective recompute in their sense
      // replays the core in the backward instead and keeps none of them.
      const double kept = UnfusedAttentionSavedBytes(*op);
      cost.recomputable_seconds += *t;
      cost.saved_bytes += kept;
      cost.unfused_attention_bytes += kept;
    }
    if (ir::IsBackwardRole(op->role())) {
      for (size_t k = 0; k < op->num_operands(); ++k) {
        if (!ir::ReadsOperand(*op, k)) continue;
        const ir::Value* v = storage.Of(op->operand(k));
        if (saved.count(v) != 0) continue;
        const bool fed = v->producer() == nullptr && v->role() == ir::ValueRole::kDataInput;
        const bool forward = v->producer() != nullptr && v->producer()->role() == ir::OpRole::kForward;
        if (!fed && !forward) continue;
        saved.insert(v);
        cost.saved_bytes += static_cast<double>(v->type().num_bytes());
      }
    }
  }
  const BackwardWalk walk = WalkBackward(local);
  cost.backward_excess_bytes = walk.excess;
  cost.backward_excess_with_grads_bytes = walk.with_grads;
  cost.backward_excess_accumulating_bytes = walk.accumulating;
  return cost;
}

}  // namespace pdist::planner
