// ShardOptimizer: each parameter's update moved onto slices along the data-parallel axis.
#include "passes/sharding.h"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "ir/dist/remesh.h"
#include "ir/op_def.h"
#include "ir/pipeline_job.h"
#include "ir/status.h"

namespace pdist::passes {
namespace {

using ir::Operation;
using ir::Value;

// The first dim no mesh dim shards whose size divides by `ranks`; -1 when none does.
int64_t ShardableDim(const Value& v, int64_t ranks) {
  const ir::DistAttr& attr = *v.dist_attr();
  for (size_t d = 0; d < attr.dims_mapping.size(); ++d) {
    if (attr.dims_mapping[d] == -1 && v.type().shape[d] % ranks == 0) return static_cast<int64_t>(d);
  }
  return -1;
}

class OptimizerSharder {
 public:
  OptimizerSharder(ir::Program& program, const ShardingOptions& options)
      : program_(program), stage_(options.stage), axis_(options.axis), degree_(options.degree),
        accumulate_shards_(options.accumulate_shards) {}

  absl::StatusOr<ShardingReport> Run() {
    PDIST_RETURN_IF_ERROR(CheckInput());
    CollectUses();
    for (size_t u = 0; u < updates_.size(); ++u) {
      Value* param = updates_[u].state;
      Operation* update = updates_[u].new_value->producer();
      if (param->role() != ir::ValueRole::kParameter || update == nullptr || update->role() != ir::OpRole::kOptimizer) {
        continue;
      }
      if (Operation* rounded_from = MasterUpdate(*update)) {
        PDIST_RETURN_IF_ERROR(Shard(param, rounded_from, update));
      } else if (update->num_operands() > 0 && update->operand(0) == param) {
        PDIST_RETURN_IF_ERROR(Shard(param, update, nullptr));
      }
    }
    Emit();
    return report_;
  }

  // Each persistent argument that `reference` stores under another DistAttr takes that one and
  // is gathered, per job, before its uses, as stage 3 gathers its parameters.
  absl::StatusOr<int64_t> StoreLike(const ir::Program& reference) {
    CollectUses();
    int64_t restored = 0;
    for (Value* arg : program_.block().arguments()) {
      if (!arg->is_persistent() || !arg->dist_attr()) continue;
      const Value* stored = reference.FindArgument(arg->name());
      if (stored == nullptr || !stored->dist_attr() || *stored->dist_attr() == *arg->dist_attr()) continue;
      if (stored->type() != arg->type()) {
        return absl::InvalidArgumentError(absl::StrCat("storage: '", arg->name(), "' is ", arg->type().ToString(),
                                                       " here but ", stored->type().ToString(), " where it is stored"));
      }
      const ir::DistAttr used = *arg->dist_attr();
      arg->set_dist_attr(*stored->dist_attr());
      GatherBeforeUses(arg, nullptr, used);
      ++restored;
    }
    Emit();
    return restored;
  }

 private:
  struct Use {
    Operation* op;
    size_t index;
  };

  absl::Status CheckInput() const {
    if (program_.local_rank() >= 0) {
      return absl::FailedPreconditionError("sharding: the program is already one rank's local program; shard the global one, before partition");
    }
    if (program_.updates().empty()) return absl::FailedPreconditionError("sharding: the program has no optimizer updates (run optimizer first)");
    for (const Value* arg : program_.block().arguments()) {
      if (!arg->dist_attr()) {
        return absl::FailedPreconditionError(
            absl::StrCat("sharding: '", arg->name(), "' has no DistAttr; run completion before sharding"));
      }
    }
    return absl::OkStatus();
  }

  // A reshard of `v` to `target`, running as `like` does; the caller places it.
  std::unique_ptr<Operation> NewReshard(Value* v, ir::DistAttr target, const Operation& like, ir::ValueRole role) {
    Value* out = program_.NewValue(v->type(), role);
    out->set_dist_attr(std::move(target));
    auto op = std::make_unique<Operation>("reshard", std::vector<Value*>{v}, ir::AttributeMap{});
    op->CopyRoleAndChunk(like);
    op->add_result(out);
    ++report_.reshards;
    return op;
  }

  // NewReshard's, emitted before `before` (at the end when null); its result.
  Value* Reshard(Value* v, ir::DistAttr target, const Operation* before, const Operation& like, ir::ValueRole role) {
    std::unique_ptr<Operation> op = NewReshard(v, std::move(target), like, role);
    Value* out = op->result(0);
    (before == nullptr ? at_end_ : before_[before]).push_back(std::move(op));
    return out;
  }

  // Under mixed precision a low-precision parameter's new value is `cast(update(master, ...))`
  // (passes/optimizer.h): the update op that `rounding` rounds, or null when it is not that.
  static Operation* MasterUpdate(const Operation& rounding) {
    if (rounding.type() != "cast" || rounding.num_operands() != 1) return nullptr;
    Operation* update = rounding.operand(0)->producer();
    if (update == nullptr || update->role() != ir::OpRole::kOptimizer || update->num_operands() == 0) return nullptr;
    const Value* master = update->operand(0);
    return master->role() == ir::ValueRole::kOptimizerState && master->type().shape == rounding.result(0)->type().shape
               ? update
               : nullptr;
  }

  void CollectUses() {
    for (const auto& op : program_.block().ops()) {
      for (size_t i = 0; i < op->num_operands(); ++i) {
        if (op->operand(i) != nullptr) uses_[op->operand(i)].push_back({op.get(), i});
      }
    }
    updates_ = program_.updates();
  }

  bool OnlyUsedBy(const Value* v, const Operation* op) const {
    auto it = uses_.find(v);
    if (it == uses_.end()) return false;
    for (const Use& use : it->second) {
      if (use.op != op) return false;
    }
    return true;
  }

  // `rounding`: the cast of the updated master weight to the parameter's dtype (mixed
  // precision), whose result is the parameter's new value; null when `update` writes it directly.
  // The master weight is one more optimizer state, sharded like the moments.
  absl::Status Shard(Value* param, Operation* update, Operation* rounding) {
    const ir::DistAttr whole = *param->dist_attr();
    const int64_t axis = whole.mesh.DimIndex(axis_);
    if (axis < 0 || whole.mesh.dim_size(axis) == 1) return absl::OkStatus();
    const std::string what = absl::StrCat("'", param->name(), "' ", param->type().ToString());
    for (int64_t m : whole.dims_mapping) {
      if (m == axis) {
        report_.kept_whole.push_back(absl::StrCat(what, ": already sharded along ", axis_));
        return absl::OkStatus();
      }
    }
    const int64_t ranks = degree_ > 0 ? degree_ : whole.mesh.dim_size(axis);
    if (whole.mesh.dim_size(axis) % ranks != 0) {
      return absl::InvalidArgumentError(absl::StrCat("sharding: degree ", ranks, " does not divide the ",
                                                     whole.mesh.dim_size(axis), " ranks of axis '", axis_, "' (", what,
                                                     " on ", whole.mesh.ToString(), "); use a divisor of ",
                                                     whole.mesh.dim_size(axis)));
    }
    if (ranks == 1) return absl::OkStatus();
    const int64_t dim = ShardableDim(*param, ranks);
    if (dim < 0) {
      const bool hybrid = ranks < whole.mesh.dim_size(axis);
      report_.kept_whole.push_back(absl::StrCat(what, ": no unsharded dim divisible by ", axis_, hybrid ? "_shard " : " ", ranks));
      return absl::OkStatus();
    }
    PDIST_ASSIGN_OR_RETURN(ir::DistAttr sliced, OnUpdateMesh(whole, axis, ranks));
    sliced.dims_mapping[static_cast<size_t>(dim)] = ranks == whole.mesh.dim_size(axis) ? axis : axis + 1;

    // Operands shaped like the parameter: the parameter, its gradient, the moment states.
    for (size_t i = 0; i < update->num_operands(); ++i) {
      Value* x = update->operand(i);
      if (x == nullptr || x->type().shape != param->type().shape) continue;
      if (x == param) {
        if (stage_ < 3) update->set_operand(i, Reshard(param, sliced, update, *update, ir::ValueRole::kActivation));
      } else if (x->is_argument()) {
        if (!OnlyUsedBy(x, update)) {
          return absl::FailedPreconditionError(absl::StrCat("sharding: optimizer state '", x->name(), "' of ", what,
                                                            " is read by more than ", update->Describe()));
        }
        x->set_dist_attr(sliced);
      } else if (stage_ >= 2 && x->producer() != nullptr && x->producer()->type() == "reshard" && OnlyUsedBy(x, update) &&
                 x->producer()->operand(0)->dist_attr()->is_partial()) {
        x->set_dist_attr(sliced);  // the gradient's all-reduce becomes a reduce-scatter
        if (accumulate_shards_) ReduceWhereMade(*x->producer());
      } else {
        // Stage 1 keeps the all-reduce (every rank holds the whole gradient) and slices it.
        update->set_operand(i, Reshard(x, sliced, update, *update, ir::ValueRole::kGradient));
      }
    }
    for (Value* r : update->results()) {
      if (r->type().shape == param->type().shape) r->set_dist_attr(sliced);
    }
    if (rounding != nullptr) rounding->result(0)->set_dist_attr(sliced);
    const Operation* writes_param = rounding != nullptr ? rounding : update;
    for (ir::StateUpdate& u : updates_) {
      if (u.new_value->producer() != writes_param || u.state != param) continue;
      if (stage_ < 3) u.new_value = Reshard(u.new_value, whole, nullptr, *update, ir::ValueRole::kActivation);
    }
    if (stage_ == 3) {
      param->set_dist_attr(sliced);
      GatherBeforeUses(param, update, whole);
    }
    ++report_.sharded;
    return absl::OkStatus();
  }

  // ShardingOptions::accumulate_shards: the gradient's reshard joins the job that makes the
  // gradient (a backward or backward_weight op of some chunk), so it runs per micro-batch.
  void ReduceWhereMade(Operation& reshard) {
    const Operation* made_by = reshard.operand(0)->producer();
    if (made_by == nullptr || !ir::IsBackwardRole(made_by->role())) return;
    reshard.CopyRoleAndChunk(*made_by);
    ++report_.reduced_per_micro_batch;
  }

  // The DistAttr the update runs on, before its dim is sharded: `whole` itself when the shards
  // span the axis; otherwise `whole` on the mesh that splits the axis into replicas × `ranks`
  // shards (hybrid sharding: "dp" of 4 ranks, degree 2 → [dp_replica 2, dp_shard 2]), over the
  // same processes, so the reshards to and from it are planned on one mesh (ir/dist/remesh.h).
  absl::StatusOr<ir::DistAttr> OnUpdateMesh(const ir::DistAttr& whole, int64_t axis, int64_t ranks) const {
    const int64_t size = whole.mesh.dim_size(axis);
    if (ranks == size) return whole;
    std::vector<int64_t> shape = whole.mesh.shape();
    std::vector<std::string> names = whole.mesh.dim_names();
    const auto at = static_cast<size_t>(axis);
    shape[at] = size / ranks;
    shape.insert(shape.begin() + axis + 1, ranks);
    names[at] = axis_ + "_replica";
    names.insert(names.begin() + axis + 1, axis_ + "_shard");
    PDIST_ASSIGN_OR_RETURN(ir::ProcessMesh split, ir::ProcessMesh::Create(shape, whole.mesh.process_ids(), names));
    std::optional<ir::DistAttr> on_split = ir::Remesh(whole, split);
    if (!on_split) {
      return absl::InternalError(absl::StrCat("sharding: ", whole.ToString(), " cannot be said on ", split.ToString()));
    }
    return *on_split;
  }

  // Stage 3: one gather per (role, chunk) — per job — for the uses there; Emit places it. A use
  // of the type alone (ir::OpDef::type_only_operands: the add_grad of a bias) takes a gather of
  // its chunk made for another job, which it does not read, rather than one of its own that
  // nothing would read either (the executor would wait for it to free it).
  void GatherBeforeUses(Value* param, const Operation* update, const ir::DistAttr& whole) {
    std::map<std::pair<ir::OpRole, int64_t>, Value*> gathered;
    std::vector<const Use*> type_only;
    for (const Use& use : uses_[param]) {
      if (use.op == update) continue;
      if (!ir::ReadsOperand(*use.op, use.index)) {
        type_only.push_back(&use);
        continue;
      }
      use.op->set_operand(use.index, GatherFor(param, whole, *use.op, gathered));
    }
    for (const Use* use : type_only) {
      Value* any = nullptr;
      for (const auto& [job, g] : gathered) {
        // Not the prologue's: what a type-only reader takes lives as long as that reader's job.
        if (job.second == use->op->chunk() && g->producer()->role() != ir::OpRole::kPrologue) any = g;
      }
      use->op->set_operand(use->index, any != nullptr ? any : GatherFor(param, whole, *use->op, gathered));
    }
  }

  // The gather of `param` for the job `op` runs in, made on first use.
  Value* GatherFor(Value* param, const ir::DistAttr& whole, const Operation& op,
                   std::map<std::pair<ir::OpRole, int64_t>, Value*>& gathered) {
    Value*& g = gathered[{op.role(), op.chunk()}];
    if (g == nullptr) {
      gathers_.push_back({NewReshard(param, whole, op, ir::ValueRole::kActivation), &op});
      g = gathers_.back().op->result(0);
    }
    return g;
  }

  // Each job's gathers are issued one ahead: the gather of the parameter used next goes before
  // the first use of the one used now, so the communication stream fetches it while that
  // compute runs (one extra gathered parameter in flight); the job's first gather waits.
  void PlaceGathers() {
    absl::flat_hash_map<const Operation*, size_t> position;
    for (size_t i = 0; i < program_.block().ops().size(); ++i) position[program_.block().ops()[i].get()] = i;
    std::map<std::pair<ir::OpRole, int64_t>, std::vector<PendingGather*>> jobs;
    for (PendingGather& g : gathers_) jobs[{g.first_use->role(), g.first_use->chunk()}].push_back(&g);
    for (auto& [job, list] : jobs) {
      std::stable_sort(list.begin(), list.end(), [&](const PendingGather* a, const PendingGather* b) {
        return position.at(a->first_use) < position.at(b->first_use);
      });
      for (size_t i = 0; i < list.size(); ++i) {
        const Operation* at = list[i == 0 ? 0 : i - 1]->first_use;
        before_[at].push_back(std::move(list[i]->op));
      }
    }
  }

  void Emit() {
    PlaceGathers();
    std::vector<std::unique_ptr<Operation>>& ops = program_.block().mutable_ops();
    std::vector<std::unique_ptr<Operation>> out;
    out.reserve(ops.size() + static_cast<size_t>(report_.reshards));
    for (std::unique_ptr<Operation>& op : ops) {
      auto it = before_.find(op.get());
      if (it != before_.end()) {
        for (std::unique_ptr<Operation>& r : it->second) out.push_back(std::move(r));
      }
      out.push_back(std::move(op));
    }
    for (std::unique_ptr<Operation>& r : at_end_) out.push_back(std::move(r));
    ops = std::move(out);
    program_.clear_updates();
    for (const ir::StateUpdate& u : updates_) program_.add_update(u.state, u.new_value);
  }

  ir::Program& program_;
  const int64_t stage_;
  const std::string axis_;
  const int64_t degree_;  // ranks each state is sharded over; 0: the whole axis
  const bool accumulate_shards_;
  ShardingReport report_;
  absl::flat_hash_map<const Value*, std::vector<Use>> uses_;
  std::vector<ir::StateUpdate> updates_;
  absl::flat_hash_map<const Operation*, std::vector<std::unique_ptr<Operation>>> before_;
  std::vector<std::unique_ptr<Operation>> at_end_;
  struct PendingGather {
    std::unique_ptr<Operation> op;
    const Operation* first_use;
  };
  std::vector<PendingGather> gathers_;  // stage 3, placed by PlaceGathers
};

}  // namespace

absl::StatusOr<ShardingReport> ShardOptimizer(ir::Program& program, const ShardingOptions& options) {
  if (options.stage < 1 || options.stage > 3) {
    return absl::InvalidArgumentError(absl::StrCat("sharding: stage must be 1, 2 or 3, got ", options.stage));
  }
  if (options.degree < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("sharding: degree must be >= 1 (or 0: the whole axis), got ", options.degree));
  }
  if (options.accumulate_shards && options.stage < 2) {
    return absl::InvalidArgumentError(
        "sharding: accumulate_shards needs stage 2 or 3 (stage 1 all-reduces whole gradients)");
  }
  return OptimizerSharder(program, options).Run();
}

absl::StatusOr<int64_t> StoreLike(ir::Program& program, const ir::Program& reference) {
  if (program.local_rank() >= 0 || reference.local_rank() >= 0) {
    return absl::FailedPreconditionError("storage: match the global programs, before partition");
  }
  return OptimizerSharder(program, {.stage = 3, .axis = ""}).StoreLike(reference);
}

}  // namespace pdist::passes
