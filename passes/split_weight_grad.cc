// SplitWeightGradients: matmul_grad as two matmuls, then W roles by reverse reachability.
#include "passes/split_weight_grad.h"

#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ir/builder.h"
#include "ir/op_def.h"
#include "ir/status.h"
#include "passes/spmd_call.h"

namespace pdist::passes {
namespace {

using ir::Operation;
using ir::Value;

bool UsedOnce(const Value* v, const std::unordered_map<const Value*, int>& uses) {
  auto it = uses.find(v);
  return it != uses.end() && it->second > 0;
}

// A matmul producing `result` (an existing value: its uses and bindings stay as they are).
absl::StatusOr<std::unique_ptr<Operation>> Matmul(const Operation& like, Value* x, Value* y, bool trans_x, bool trans_y,
                                                  Value* result) {
  PDIST_ASSIGN_OR_RETURN(const ir::OpDef* def, ir::OpRegistry::Global().Lookup("matmul"));
  PDIST_ASSIGN_OR_RETURN(ir::AttributeMap attrs, ir::NormalizeAttributes(*def, {{"trans_x", trans_x}, {"trans_y", trans_y}}));
  PDIST_ASSIGN_OR_RETURN(std::vector<ir::TensorType> types, ir::InferResultTypes(*def, {x, y}, attrs));
  if (types[0] != result->type()) {
    return absl::InternalError(absl::StrCat("split of ", like.Describe(), ": a product gives ", types[0].ToString(),
                                            ", the gradient is ", result->type().ToString()));
  }
  auto op = std::make_unique<Operation>("matmul", std::vector<Value*>{x, y}, std::move(attrs));
  op->CopyRoleAndChunk(like);
  op->add_result(result);
  return op;
}

// matmul_grad's two products, in the order they run; the reshapes flatten the batch dims.
absl::StatusOr<std::vector<std::unique_ptr<Operation>>> SplitMatmulGrad(ir::Program& program, Operation& op) {
  Value* x = op.operand(0);
  Value* w = op.operand(1);
  Value* dy = op.operand(2);
  PDIST_ASSIGN_OR_RETURN(bool trans_y, ir::GetBool(op.attrs(), "trans_y"));
  std::vector<std::unique_ptr<Operation>> made;
  PDIST_ASSIGN_OR_RETURN(made.emplace_back(), Matmul(op, dy, w, false, !trans_y, op.result(0)));
  Value* x2 = x;
  Value* dy2 = dy;
  if (x->type().rank() > 2) {
    const size_t before = program.block().ops().size();
    ir::Builder b(&program);  // appends; moved into `made` below
    b.SetOpRoleAndChunkFrom(op);
    b.set_result_role(ir::ValueRole::kGradient);
    const int64_t k = x->type().shape.back();
    const int64_t n = dy->type().shape.back();
    const int64_t rows = x->type().num_elements() / k;
    PDIST_ASSIGN_OR_RETURN(x2, b.Op1("reshape", {x}, {{"shape", std::vector<int64_t>{rows, k}}}));
    PDIST_ASSIGN_OR_RETURN(dy2, b.Op1("reshape", {dy}, {{"shape", std::vector<int64_t>{rows, n}}}));
    auto& ops = program.block().mutable_ops();
    for (size_t i = before; i < ops.size(); ++i) made.push_back(std::move(ops[i]));
    ops.resize(before);
  }
  // The weight [k,n] is x2ᵀ·dy2; with trans_y it is [n,k] = dy2ᵀ·x2.
  PDIST_ASSIGN_OR_RETURN(made.emplace_back(), trans_y ? Matmul(op, dy2, x2, true, false, op.result(1))
                                                      : Matmul(op, x2, dy2, true, false, op.result(1)));
  return made;
}


ir::TensorDistSpec SpecOf(const Value& v) {
  return {v.type().shape, v.dist_attr()->dims_mapping, v.dist_attr()->partial};
}

// After completion every value carries a DistAttr, and matmul_grad's operands are already what
// its rule asked for. The products are given theirs from matmul's and reshape's rules; the split
// is kept only where those rules ask for no reshard and give the two gradients the attributes
// completion gave matmul_grad — so splitting changes which job runs a product, never what is
// communicated. (Split before completion, the product of the input gradient merged its
// operands first-wins from the activation gradient and all-gathered the weight instead.)
absl::StatusOr<bool> GiveSplitDistAttrs(const Operation& grad, const std::vector<std::unique_ptr<Operation>>& made) {
  const ir::ProcessMesh& mesh = grad.result(0)->dist_attr()->mesh;
  for (const auto& op : made) {
    SpmdCall call;
    call.def = ir::OpRegistry::Global().Find(op->type());
    call.attrs = &op->attrs();
    call.mesh_shape = mesh.shape();
    call.mesh = &mesh;
    for (const Value* v : op->operands()) {
      if (!v->dist_attr() || v->dist_attr()->mesh != mesh) return false;
      call.inputs.push_back(SpecOf(*v));
    }
    call.result_shapes.emplace();
    for (const Value* r : op->results()) call.result_shapes->push_back(r->type().shape);
    absl::StatusOr<ir::SpmdResult> answered = RunSpmdRule(call);
    if (!answered.ok()) return false;  // the rule cannot place the product: keep matmul_grad
    const ir::SpmdResult& rule = *answered;
    for (size_t i = 0; i < call.inputs.size(); ++i) {
      if (rule.inputs[i].dims_mapping != call.inputs[i].dims_mapping || rule.inputs[i].partial != call.inputs[i].partial) {
        return false;
      }
    }
    for (size_t i = 0; i < op->results().size(); ++i) {
      Value* r = op->result(i);
      ir::DistAttr attr{mesh, rule.outputs[i].dims_mapping, rule.outputs[i].partial};
      if (r->dist_attr()) {
        if (*r->dist_attr() != attr) return false;
      } else {
        r->set_dist_attr(std::move(attr));
      }
    }
  }
  return true;
}

// A boundary's gradient: a reshard to another stage's mesh. Before completion (a program without
// DistAttrs on it) every backward reshard is one.
bool IsBoundaryReshard(const Operation& op) {
  if (op.type() != "reshard") return false;
  const Value* from = op.operand(0);
  const Value* to = op.result(0);
  return !from->dist_attr() || !to->dist_attr() || from->dist_attr()->mesh != to->dist_attr()->mesh;
}

}  // namespace

absl::StatusOr<WeightGradientSplit> SplitWeightGradients(ir::Program& program) {
  WeightGradientSplit out;
  std::unordered_map<const Value*, int> uses;
  for (const auto& op : program.block().ops()) {
    for (const Value* v : op->operands()) {
      if (v != nullptr) ++uses[v];
    }
  }
  for (const ir::StateUpdate& g : program.gradients()) ++uses[g.new_value];

  std::vector<std::unique_ptr<Operation>> old = std::move(program.block().mutable_ops());
  program.block().mutable_ops().clear();
  for (std::unique_ptr<Operation>& op : old) {
    const bool splittable = op->type() == "matmul_grad" && op->role() == ir::OpRole::kBackward &&
                            op->operand(1)->type().rank() == 2 && op->operand(0)->type().rank() >= 2 &&
                            !ir::GetBool(op->attrs(), "trans_x").value_or(true) && UsedOnce(op->result(0), uses) &&
                            UsedOnce(op->result(1), uses);
    if (!splittable) {
      program.block().Append(std::move(op));
      continue;
    }
    PDIST_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Operation>> made, SplitMatmulGrad(program, *op));
    if (op->result(0)->dist_attr()) {
      PDIST_ASSIGN_OR_RETURN(bool kept, GiveSplitDistAttrs(*op, made));
      if (!kept) {
        // The products are dropped: their results go back to matmul_grad; the reshapes' stay in
        // the program's values, made by nothing and read by nothing, and get a DistAttr as every
        // value of a completed program has (partition localises every value's type).
        for (auto& m : made) {
          for (Value* r : m->results()) {
            r->set_producer(nullptr, 0);
            if (!r->dist_attr()) {
              r->set_dist_attr(ir::DistAttr::Replicated(op->result(0)->dist_attr()->mesh, r->type().rank()));
            }
          }
        }
        for (int i = 0; i < 2; ++i) op->result(i)->set_producer(op.get(), i);
        program.block().Append(std::move(op));
        continue;
      }
    }
    for (auto& m : made) program.block().Append(std::move(m));
    ++out.matmuls_split;
  }

  // B: what the previous stage waits for — the reshards of the gradients that cross a stage
  // boundary — and every op they need. The rest of the backward only feeds the optimizer: W.
  std::unordered_map<const Value*, std::vector<const Operation*>> readers;
  for (const auto& op : program.block().ops()) {
    for (const Value* v : op->operands()) {
      if (v != nullptr) readers[v].push_back(op.get());
    }
  }
  std::unordered_set<const Operation*> upstream;  // B ops: the boundary and what it needs
  auto& ops = program.block().mutable_ops();
  for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
    Operation& op = **it;
    if (op.role() != ir::OpRole::kBackward) continue;
    bool needed = IsBoundaryReshard(op);
    for (const Value* r : op.results()) {
      for (const Operation* reader : readers[r]) needed = needed || upstream.count(reader) > 0;
    }
    if (needed) {
      upstream.insert(&op);
    } else {
      op.set_role(ir::OpRole::kBackwardWeight);
      ++out.weight_ops;
    }
  }
  return out;
}

}  // namespace pdist::passes
