// InsertReshards: results take their producers' rule outputs; operands that differ from what
// their consumer needs are replaced by reshard ops.
#include "passes/reshard_insertion.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "ir/status.h"

namespace pdist::passes {
namespace {

using ir::Operation;
using ir::Value;

class ReshardInserter {
 public:
  ReshardInserter(ir::Program& program, DistState& state) : program_(program), state_(state) {}

  absl::StatusOr<int64_t> Run() {
    std::vector<std::unique_ptr<Operation>> ops = std::move(program_.block().mutable_ops());
    out_.reserve(ops.size() + ops.size() / 8);
    for (size_t i = 0; i < ops.size(); ++i) {
      absl::Status visited = Visit(ops[i]);
      if (visited.ok()) continue;
      // Leave a whole program behind: what is done so far, then the ops not visited yet.
      for (size_t k = i; k < ops.size(); ++k) out_.push_back(std::move(ops[k]));
      program_.block().mutable_ops() = std::move(out_);
      return visited;
    }
    ReshardUpdates();
    program_.block().mutable_ops() = std::move(out_);
    return inserted_;
  }

 private:
  // Moves `op` (and the reshards it needs) to out_; on error leaves `op` where it is.
  absl::Status Visit(std::unique_ptr<Operation>& op) {
    const MeshId mesh = state_.OpMesh(*op);
    if (mesh < 0) return absl::InternalError(absl::StrCat("completion: no mesh for ", op->type()));
    PDIST_ASSIGN_OR_RETURN(const ir::SpmdResult* r, state_.RunRule(*op, mesh, SpmdDirection::kForward));

    for (size_t i = 0; i < op->num_operands(); ++i) {
      Value* v = op->operand(i);
      if (v == nullptr) continue;
      const bool untargeted = untargeted_.erase(v) > 0;
      if (state_.Matches(v, mesh, r->inputs[i])) continue;
      const DistOrigin origin{untargeted ? DistOrigin::Kind::kReshardChosen : DistOrigin::Kind::kReshardInserted,
                              op.get(), static_cast<int>(i)};
      if (untargeted) {  // the reshard that makes v goes where its first use needs it
        state_.Set(v, mesh, r->inputs[i], origin);
        continue;
      }
      op->set_operand(i, ReshardOf(v, mesh, r->inputs[i], origin, op.get()));
    }

    std::vector<size_t> mismatched;  // annotated results the op cannot give as they are
    for (size_t j = 0; j < op->num_results(); ++j) {
      const Value* result = op->result(j);
      const bool same = state_.Matches(result, mesh, r->outputs[j]);
      if (!state_.at(result).fixed) {
        const DistOrigin origin = DistOrigin::Forward(op.get(), static_cast<int>(j));
        if (same) {
          state_.at(result).origin = origin;
        } else {
          state_.Set(result, mesh, r->outputs[j], origin);
        }
        if (IsReshard(*op)) untargeted_.insert(result);
      } else if (!same && !IsReshard(*op)) {  // a reshard's result is its target
        mismatched.push_back(j);
      }
    }
    if (mismatched.empty()) {
      out_.push_back(std::move(op));
      return absl::OkStatus();
    }
    return SplitAnnotatedResults(std::move(op), mesh, *r, mismatched);
  }

  // The op writes fresh values where its annotated results differ from what it produces; each
  // annotated value becomes the result of a reshard from its fresh value. The annotated values
  // keep their identity, so their uses and the program's bindings need no rewiring.
  absl::Status SplitAnnotatedResults(std::unique_ptr<Operation> op, MeshId mesh, const ir::SpmdResult& r,
                                     const std::vector<size_t>& mismatched) {
    auto copy = std::make_unique<Operation>(op->type(), op->operands(), op->attrs());
    copy->CopyRoleAndChunk(*op);
    std::vector<std::pair<Value*, Value*>> splits;  // (fresh, annotated)
    for (size_t j = 0; j < op->num_results(); ++j) {
      Value* result = op->result(j);
      if (std::find(mismatched.begin(), mismatched.end(), j) == mismatched.end()) {
        copy->add_result(result);
        continue;
      }
      Value* fresh = program_.NewValue(result->type(), result->role());
      state_.Set(fresh, mesh, r.outputs[j], DistOrigin::Forward(copy.get(), static_cast<int>(j)));
      copy->add_result(fresh);
      splits.emplace_back(fresh, result);
    }
    state_.RetargetOrigins(op.get(), copy.get());
    const Operation* made = copy.get();
    out_.push_back(std::move(copy));
    for (auto [fresh, annotated] : splits) {
      auto reshard = std::make_unique<Operation>("reshard", std::vector<Value*>{fresh}, ir::AttributeMap{});
      reshard->CopyRoleAndChunk(*made);
      reshard->add_result(annotated);  // now produced by the reshard; it keeps its annotation
      out_.push_back(std::move(reshard));
      ++inserted_;
    }
    return absl::OkStatus();
  }

  // A reshard of v to `target` on `mesh`, made once per (v, target) and placed where it is
  // first needed. It runs where its first user does (ir/pipeline_job.h) — or in an earlier job
  // of the same model chunk when a later user runs there: a backward-weight user may come first
  // in program order and a backward user after it, and the backward job runs first. A state
  // update's runs with the optimizer.
  Value* ReshardOf(Value* v, MeshId mesh, const ir::TensorDistSpec& target, const DistOrigin& origin,
                   const Operation* user) {
    std::vector<Value*>& made = cache_[v];
    for (Value* resharded : made) {
      if (!state_.Matches(resharded, mesh, target)) continue;
      Operation* reshard = resharded->producer();
      if (user != nullptr && reshard->chunk() == user->chunk() &&
          ir::StepOrderOf(user->role()) < ir::StepOrderOf(reshard->role())) {
        reshard->set_role(user->role());
      }
      return resharded;
    }
    // Arguments are fed or persistent; what a reshard makes of them is an activation.
    const bool keeps_role = v->role() == ir::ValueRole::kActivation || v->role() == ir::ValueRole::kGradient;
    Value* out = program_.NewValue(v->type(), keeps_role ? v->role() : ir::ValueRole::kActivation);
    auto reshard = std::make_unique<Operation>("reshard", std::vector<Value*>{v}, ir::AttributeMap{});
    if (user != nullptr) {
      reshard->CopyRoleAndChunk(*user);
    } else {
      reshard->set_role(ir::OpRole::kOptimizer);
    }
    reshard->add_result(out);
    out_.push_back(std::move(reshard));
    state_.Set(out, mesh, target, origin);
    made.push_back(out);
    ++inserted_;
    return out;
  }

  // After the step a state takes its update value's contents, so both must be distributed alike.
  void ReshardUpdates() {
    std::vector<ir::StateUpdate> updates = program_.updates();
    bool changed = false;
    for (size_t u = 0; u < updates.size(); ++u) {
      const ValueDist& target = state_.at(updates[u].state);
      const ir::TensorDistSpec spec{updates[u].state->type().shape, target.dims_mapping, target.partial};
      if (state_.Matches(updates[u].new_value, target.mesh, spec)) continue;
      updates[u].new_value = ReshardOf(updates[u].new_value, target.mesh, spec,
                                       {DistOrigin::Kind::kReshardInserted, nullptr, static_cast<int>(u)}, nullptr);
      changed = true;
    }
    if (!changed) return;
    program_.clear_updates();
    for (const ir::StateUpdate& u : updates) program_.add_update(u.state, u.new_value);
  }

  ir::Program& program_;
  DistState& state_;
  std::vector<std::unique_ptr<Operation>> out_;
  absl::flat_hash_map<const Value*, std::vector<Value*>> cache_;  // reshards made of a value
  // Results of reshards written without a target (the gradient of a reshard built before
  // completion ran) that no op has used yet: identity until their first use says otherwise.
  absl::flat_hash_set<const Value*> untargeted_;
  int64_t inserted_ = 0;
};

}  // namespace

absl::StatusOr<int64_t> InsertReshards(ir::Program& program, DistState& state) {
  return ReshardInserter(program, state).Run();
}

}  // namespace pdist::passes
