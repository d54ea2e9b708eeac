// Partition: local types, reshard lowering, local attributes, and a shape check per op.
#include "passes/partition.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "ir/builder.h"
#include "ir/dist/local_slice.h"
#include "ir/dist/shard_tensor.h"
#include "ir/op_def.h"
#include "ir/status.h"
#include "passes/reshard/reshard_primitive.h"

namespace pdist::passes {
namespace {

using ir::DistAttr;
using ir::Operation;
using ir::Value;

std::string NameOf(const Value& v) {
  return v.name().empty() ? absl::StrCat("%", v.id()) : absl::StrCat("'", v.name(), "' (%", v.id(), ")");
}

// The coordinate of `rank` along mesh dim `m` of `attr`'s mesh.
int64_t CoordAlong(const DistAttr& attr, int64_t m, int64_t rank) {
  return attr.mesh.CoordinateOf(rank)[static_cast<size_t>(m)];
}

class Partitioner {
 public:
  Partitioner(const ir::Program& global, int64_t rank, ReshardPlanCache& plans)
      : global_(global), rank_(rank), plans_(plans) {}

  absl::StatusOr<ir::Program> Run() {
    if (global_.local_rank() >= 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("the program is already rank ", global_.local_rank(), "'s local program"));
    }
    ir::Program local = global_.Clone();
    local.set_local_rank(rank_);
    world_size_ = ir::RanksNamedBy(global_);
    PDIST_RETURN_IF_ERROR(LocaliseTypes(local));
    std::vector<std::unique_ptr<Operation>> ops = std::move(local.block().mutable_ops());
    local.block().mutable_ops().clear();
    ir::Builder b(&local);
    for (const std::unique_ptr<Operation>& op : ops) {
      for (const Value* v : op->operands()) first_use_.emplace(v, op.get());
      chunks_ = std::max(chunks_, op->chunk() + 1);
    }
    for (std::unique_ptr<Operation>& op : ops) {
      b.SetOpRoleAndChunkFrom(*op);
      if (op->type() == "reshard") {  // planned from the global DistAttrs, before any remapping
        PDIST_RETURN_IF_ERROR(WithContext(LowerReshard(b, *op), absl::StrCat("partition, rank ", rank_, ": ", op->Describe())));
        continue;
      }
      for (size_t i = 0; i < op->num_operands(); ++i) op->set_operand(i, Remapped(op->operand(i)));
      if (op->num_results() > 0 && absent_.count(op->result(0))) continue;  // runs on another mesh
      for (const Value* v : op->operands()) {
        if (v != nullptr && absent_.count(v)) {
          return absl::InternalError(absl::StrCat("partition, rank ", rank_, ": ", op->Describe(), " reads ", NameOf(*v),
                                                  ", which lives on mesh ", v->dist_attr()->mesh.ToString(),
                                                  " (completion should have inserted a reshard)"));
        }
      }
      PDIST_RETURN_IF_ERROR(WithContext(LocaliseOp(*op), absl::StrCat("partition, rank ", rank_, ": ", op->Describe())));
      local.block().Append(std::move(op));
    }
    RemapBindings(local);
    std::vector<Value*>& args = local.block().mutable_arguments();
    args.erase(std::remove_if(args.begin(), args.end(), [&](Value* v) { return absent_.count(v) > 0; }), args.end());
    return local;
  }

 private:
  absl::Status LocaliseTypes(ir::Program& local) {
    for (int64_t id = 0; id < local.num_values(); ++id) {
      Value* v = local.FindValue(id);
      global_shapes_[v] = v->type().shape;
      if (!v->dist_attr()) {
        return absl::FailedPreconditionError(
            absl::StrCat("value ", NameOf(*v), " has no DistAttr: run completion before partition"));
      }
      const DistAttr& attr = *v->dist_attr();
      PDIST_RETURN_IF_ERROR(CheckEvenShards(attr, v->type().shape, absl::StrCat("value ", NameOf(*v))));
      if (!attr.mesh.Contains(rank_)) {
        absent_.insert(v);  // lives on another mesh (another pipeline stage)
        continue;
      }
      v->set_type({attr.LocalShape(v->type().shape), v->type().dtype});
    }
    return absl::OkStatus();
  }

  Value* Remapped(Value* v) const {
    auto it = replaced_.find(v);
    return it == replaced_.end() ? v : it->second;
  }

  // Bindings of values this rank holds; the others belong to other meshes' ranks.
  void RemapBindings(ir::Program& local) {
    if (local.loss() != nullptr) local.set_loss(absent_.count(local.loss()) ? nullptr : Remapped(local.loss()));
    std::vector<ir::ProgramOutput> outputs;
    for (const ir::ProgramOutput& o : local.outputs()) {
      if (!absent_.count(o.value)) outputs.push_back({o.name, Remapped(o.value)});
    }
    local.mutable_outputs() = std::move(outputs);
    std::vector<ir::StateUpdate> updates = local.updates(), gradients = local.gradients();
    local.clear_updates();
    for (const ir::StateUpdate& u : updates) {
      if (!absent_.count(u.state)) local.add_update(u.state, Remapped(u.new_value));
    }
    local.clear_gradients();
    for (const ir::StateUpdate& g : gradients) {
      if (!absent_.count(g.state)) local.add_gradient(g.state, Remapped(g.new_value));
    }
  }

  // Replaces the reshard by its plan's steps; the result's uses read the last step's value.
  absl::Status LowerReshard(ir::Builder& b, const Operation& op) {
    // x: the global operand (its DistAttr is the plan's source); its local piece may be another
    // value, when an earlier reshard on this rank needed no op (then the piece is that one's input).
    Value* x = op.operand(0);
    Value* y = op.result(0);
    PDIST_ASSIGN_OR_RETURN(ReshardPlan plan, plans_.Get(*x->dist_attr(), *y->dist_attr(), global_shapes_.at(y)));
    b.set_result_role(y->role());
    // current: this rank's piece of the tensor in its state so far; nullptr while the tensor
    // lives on a mesh without this rank.
    Value* current = absent_.count(x) ? nullptr : Remapped(x);
    const DistAttr* state = &*x->dist_attr();
    // In a pipelined step (ir/pipeline_job.h) a move between meshes is sent in the job that
    // made the tensor (with the steps on the source mesh) and received in the job that first
    // reads it (with the steps on the target mesh); a move within one mesh runs where the
    // reshard stands. A once-per-step reshard (the optimizer's, the prologue's) stays in its job.
    const bool between_meshes = std::any_of(plan.steps.begin(), plan.steps.end(), [](const ReshardStep& step) {
      return step.kind == ReshardStep::Kind::kSendRecv;
    });
    const bool once = ir::IsOncePerStepRole(op.role());
    const Operation& sender = between_meshes && !once && x->producer() != nullptr ? *x->producer() : op;
    auto first_use = first_use_.find(y);
    const Operation& receiver = between_meshes && !once && first_use != first_use_.end() ? *first_use->second : op;
    // A move made per micro-batch and received once per step (or the reverse) would leave
    // messages behind: both ends must run equally often.
    if (ir::IsOncePerStepRole(sender.role()) != ir::IsOncePerStepRole(receiver.role())) {
      return absl::InternalError(absl::StrCat("the move ", plan.ToString(), " would be sent in a ",
                                              ir::OpRoleName(sender.role()), " job and received in a ",
                                              ir::OpRoleName(receiver.role()), " job"));
    }
    b.SetOpRoleAndChunkFrom(sender);
    // Every rank lowers every reshard in the same order, so the moves between meshes are
    // numbered alike everywhere: the number tags their messages.
    const int64_t tag = between_meshes ? next_message_tag_++ : 0;
    for (const ReshardStep& step : plan.steps) {
      Value* before = current;
      if (step.kind == ReshardStep::Kind::kSendRecv) {
        const Message message{.tag = tag, .lane = LaneOf(sender, receiver, state->mesh, step.after.mesh)};
        PDIST_ASSIGN_OR_RETURN(current, LowerSendRecv(b, *state, step.after, {global_shapes_.at(y), y->type().dtype},
                                                      current, receiver, message));
      } else if (step.after.mesh.Contains(rank_)) {
        PDIST_ASSIGN_OR_RETURN(current, LowerStep(b, step, current));
      }
      // A step that needs no op on this rank hands back its input, whose DistAttr stays.
      if (current != nullptr && current != before) current->set_dist_attr(step.after);
      state = &step.after;
    }
    if (absent_.count(y)) return absl::OkStatus();  // the tensor ends on another mesh
    if (current == nullptr || current->type() != y->type()) {
      if (current == nullptr) return absl::InternalError(absl::StrCat("lowered reshard ", plan.ToString(), " gives rank ", rank_, " nothing"));
      return absl::InternalError(absl::StrCat("lowered reshard ", plan.ToString(), " gives ", current->type().ToString(),
                                              ", expected ", y->type().ToString()));
    }
    replaced_[y] = current;
    return absl::OkStatus();
  }

  // The channel lane of a move's messages: 0, the direction's channel, when the schedule issues
  // them in one order with the other messages between the same two ranks on both ends (NCCL
  // pairs a direction's sends and receives in issue order): a move once per step (the prologue
  // runs first everywhere, the optimizer job last), or one per micro-batch between neighbouring virtual stages along
  // the pipeline's flow — forward to the next, backward to the previous, the pairs every schedule
  // interleaves alike on both ends. Any other move (a tied table sent to a stage that is not the
  // next, a value sent in a forward job and received in a backward one) goes on a lane of its
  // own, one per (sender's job, receiver's job): its messages there come one job pair per
  // micro-batch, in micro-batch order on both ends, each job's in program order. The key is the
  // same in every program of a run (training, evaluation, prediction), which share the channels
  // made at the start. A virtual stage is chunk·pp + s on the meshes of passes/pipeline_stages.h
  // (stage s holds the ranks s·n … (s+1)·n − 1); on other meshes (placed by hand: one micro-batch,
  // one chunk) each job's messages follow the global program order, so a move within one role is
  // in order and the roles alone key the others.
  int64_t LaneOf(const Operation& sender, const Operation& receiver, const ir::ProcessMesh& from,
                 const ir::ProcessMesh& to) const {
    const auto role_s = static_cast<int64_t>(sender.role()), role_r = static_cast<int64_t>(receiver.role());
    const int64_t by_roles = 1 + role_s * 5 + role_r;
    // The prologue's messages are in order anywhere; a lane of their own keeps a table's send
    // from holding up the first micro-batch's activation queued behind it.
    if (sender.role() == ir::OpRole::kPrologue && receiver.role() == ir::OpRole::kPrologue) return by_roles;
    if (ir::IsOncePerStepRole(sender.role()) || ir::IsOncePerStepRole(receiver.role())) {
      return sender.role() == receiver.role() ? 0 : by_roles;
    }
    const bool forward = sender.role() == ir::OpRole::kForward && receiver.role() == ir::OpRole::kForward;
    const bool backward = IsBackwardRole(sender.role()) && IsBackwardRole(receiver.role());
    const int64_t n = from.size();
    auto block = [&](const ir::ProcessMesh& m) {
      const std::vector<int64_t>& ids = m.process_ids();
      for (size_t i = 0; i < ids.size(); ++i) {
        if (ids[i] != ids.front() + static_cast<int64_t>(i)) return false;
      }
      return ids.front() % n == 0;
    };
    if (to.size() != n || world_size_ % n != 0 || !block(from) || !block(to)) return forward || backward ? 0 : by_roles;
    const int64_t pp = world_size_ / n, virtual_stages = pp * chunks_;
    const int64_t from_stage = sender.chunk() * pp + from.process_ids().front() / n;
    const int64_t to_stage = receiver.chunk() * pp + to.process_ids().front() / n;
    if ((forward && to_stage == from_stage + 1) || (backward && to_stage == from_stage - 1)) return 0;
    return 1 + ((role_s * 5 + role_r) * virtual_stages + from_stage) * virtual_stages + to_stage;
  }

  struct Message {
    int64_t tag = 0;   // pairs a send with its receive
    int64_t lane = 0;  // 0: the direction's channel; else a channel of its own (LaneOf)
  };

  // The move between meshes: with meshes of one shape, the rank at each coordinate of the
  // source sends to the rank at that coordinate of the target; otherwise target rank t takes
  // the (replicated) tensor from source rank t mod |source|. Returns this rank's piece on the
  // target, or nullptr when it is not in the target mesh.
  absl::StatusOr<Value*> LowerSendRecv(ir::Builder& b, const DistAttr& from, const DistAttr& to,
                                       const ir::TensorType& global, Value* piece, const Operation& receiver,
                                       const Message& message) {
    const std::vector<int64_t>& senders = from.mesh.process_ids();
    const std::vector<int64_t>& receivers = to.mesh.process_ids();
    const bool same_shape = from.mesh.shape() == to.mesh.shape();
    auto sender_of = [&](size_t t) { return senders[same_shape ? t : t % senders.size()]; };
    Value* received = nullptr;
    for (size_t t = 0; t < receivers.size(); ++t) {
      if (sender_of(t) != rank_) continue;
      if (receivers[t] == rank_) {
        received = piece;  // this rank is on both sides: no message
      } else {
        PDIST_RETURN_IF_ERROR(
            b.Create("c_send", {piece}, {{"peer", receivers[t]}, {"tag", message.tag}, {"lane", message.lane}}).status());
      }
    }
    b.SetOpRoleAndChunkFrom(receiver);  // what follows runs on the target mesh
    for (size_t t = 0; t < receivers.size(); ++t) {
      if (receivers[t] != rank_ || sender_of(t) == rank_) continue;
      const ir::TensorType type{to.LocalShape(global.shape), global.dtype};
      PDIST_ASSIGN_OR_RETURN(received, b.Op1("c_recv", {}, {{"peer", sender_of(t)}, {"shape", type.shape},
                                                             {"dtype", type.dtype}, {"tag", message.tag},
                                                             {"lane", message.lane}}));
    }
    return received;
  }

  absl::StatusOr<Value*> LowerStep(ir::Builder& b, const ReshardStep& step, Value* x) {
    const ReshardPrimitive& primitive = ReshardPrimitiveOf(step.kind);
    if (!primitive.lower) {  // the move between meshes is lowered with its peer (see above)
      return absl::InternalError(absl::StrCat("reshard step ", step.ToString(), " has no single-rank lowering"));
    }
    return primitive.lower(b, step, x, rank_);
  }

  // Attributes that carry global sizes become local; vocab-parallel ops take their c_* form.
  absl::Status LocaliseOp(Operation& op) {
    ir::AttributeMap& attrs = op.mutable_attrs();
    const ir::OpDef* def = ir::OpRegistry::Global().Find(op.type());
    if (def == nullptr) return absl::NotFoundError(absl::StrCat("unknown op '", op.type(), "'"));
    if (!def->result_shape_attr.empty()) attrs[def->result_shape_attr] = op.result(0)->type().shape;
    if (op.type() == "dropout") PDIST_RETURN_IF_ERROR(LocaliseDropout(op));
    PDIST_RETURN_IF_ERROR(LocaliseVocabParallel(op));
    def = ir::OpRegistry::Global().Find(op.type());  // a vocab-parallel op is now its c_* form
    if (def == nullptr) return absl::NotFoundError(absl::StrCat("unknown op '", op.type(), "'"));
    PDIST_ASSIGN_OR_RETURN(std::vector<ir::TensorType> types, ir::InferResultTypes(*def, op.operands(), attrs));
    for (size_t r = 0; r < op.num_results(); ++r) {
      if (types[r] != op.result(r)->type()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "result ", r, " is ", op.result(r)->type().ToString(), " locally (", op.result(r)->dist_attr()->ToString(),
            ") but the op computes ", types[r].ToString(), " from its local operands: the SPMD rule and the kernel disagree"));
      }
    }
    return absl::OkStatus();
  }

  // The mask is drawn per element index: a piece draws at its global positions (c_dropout),
  // so it drops exactly what the whole tensor would. Ranks of a Partial group hold pieces of
  // the same positions and so draw the same mask, as the linear op needs.
  absl::Status LocaliseDropout(Operation& op) {
    DistAttr attr = *op.result(0)->dist_attr();
    attr.partial.clear();
    if (attr.is_replicated()) return absl::OkStatus();
    const ir::Shape& global = global_shapes_.at(op.result(0));
    PDIST_ASSIGN_OR_RETURN(ir::LocalSlice slice, ir::SliceOf(attr, global, rank_));
    op.mutable_attrs()["global_shape"] = global;
    op.mutable_attrs()["offsets"] = slice.offsets;
    op.set_type("c_dropout");
    return absl::OkStatus();
  }

  // embedding / embedding_grad with the table's rows sharded, and cross entropy with the
  // vocabulary (last axis) sharded: the c_* ops take the rank's first row / class.
  absl::Status LocaliseVocabParallel(Operation& op) {
    const std::string& type = op.type();
    size_t table = 0;
    int64_t axis = 0;
    if (type == "embedding" || type == "embedding_grad") {
      table = 1;
      axis = 0;
    } else if (type == "cross_entropy_with_softmax" || type == "cross_entropy_with_softmax_grad" ||
               type == "cross_entropy_with_softmax_grad_from_logits") {
      // Only the hard-label softmax over the last axis is vocab-parallel; on any other layout
      // a sharded last axis is not the softmax axis, and the plain kernel is local along it.
      table = type == "cross_entropy_with_softmax" ? 0 : 1;
      axis = static_cast<int64_t>(op.operand(table)->type().shape.size()) - 1;
      PDIST_ASSIGN_OR_RETURN(int64_t softmax_axis, ir::GetInt(op.attrs(), "axis"));
      PDIST_ASSIGN_OR_RETURN(bool soft_label, ir::GetBool(op.attrs(), "soft_label"));
      PDIST_ASSIGN_OR_RETURN(bool use_softmax, ir::GetBool(op.attrs(), "use_softmax"));
      if (softmax_axis < 0) softmax_axis += axis + 1;
      if (softmax_axis != axis || soft_label || !use_softmax) return absl::OkStatus();
    } else {
      return absl::OkStatus();
    }
    const DistAttr& attr = *op.operand(table)->dist_attr();
    const int64_t m = attr.dims_mapping[static_cast<size_t>(axis)];
    if (m < 0) return absl::OkStatus();
    const int64_t local = op.operand(table)->type().shape[static_cast<size_t>(axis)];
    ir::AttributeMap& attrs = op.mutable_attrs();
    attrs["start_index"] = CoordAlong(attr, m, rank_) * local;
    const bool communicates = type == "cross_entropy_with_softmax" || type == "cross_entropy_with_softmax_grad_from_logits";
    if (communicates) attrs["ranks"] = attr.mesh.GroupAlong({m}, rank_);
    op.set_type(type == "embedding" || type == "embedding_grad" ? absl::StrCat("c_", type)
                : type == "cross_entropy_with_softmax"           ? "c_softmax_with_cross_entropy"
                : type == "cross_entropy_with_softmax_grad"      ? "c_softmax_with_cross_entropy_grad"
                                                                 : "c_softmax_with_cross_entropy_grad_from_logits");
    return absl::OkStatus();
  }

  const ir::Program& global_;
  int64_t rank_;
  ReshardPlanCache& plans_;
  std::unordered_map<const Value*, ir::Shape> global_shapes_;
  std::unordered_map<Value*, Value*> replaced_;
  std::unordered_set<const Value*> absent_;  // values on meshes without this rank
  std::unordered_map<const Value*, const Operation*> first_use_;  // the first op that reads each value
  int64_t next_message_tag_ = 1;  // of the moves between meshes, in program order
  int64_t world_size_ = 1;        // the ranks the meshes name (ir::RanksNamedBy)
  int64_t chunks_ = 1;            // 1 + the highest chunk of any op
};

}  // namespace

absl::StatusOr<ir::Program> PartitionProgram(const ir::Program& global, int64_t rank, ReshardPlanCache& plans) {
  return Partitioner(global, rank, plans).Run();
}

std::vector<ir::ProcessMesh> MeshesOf(const ir::Program& program) {
  std::vector<ir::ProcessMesh> meshes;
  for (int64_t id = 0; id < program.num_values(); ++id) {
    const Value* v = program.FindValue(id);
    if (!v->dist_attr()) continue;
    const ir::ProcessMesh& mesh = v->dist_attr()->mesh;
    if (std::find(meshes.begin(), meshes.end(), mesh) == meshes.end()) meshes.push_back(mesh);
  }
  return meshes;
}

}  // namespace pdist::passes
