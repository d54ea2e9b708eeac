// AppendBackward: reverse sweep over the forward ops with per-op gradient builders.
#include "passes/autodiff.h"

#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "ir/builder.h"
#include "ir/op_def.h"
#include "ir/status.h"

namespace pdist::passes {

namespace {

using ir::Operation;
using ir::Value;

// Values that depend on a trainable floating-point parameter (forward reachability).
std::unordered_set<const Value*> ValuesNeedingGrad(const ir::Program& program) {
  std::unordered_set<const Value*> needs;
  for (const Value* p : program.Parameters()) {
    if (p->trainable() && ir::IsFloatingPoint(p->type().dtype)) needs.insert(p);
  }
  for (const auto& op : program.block().ops()) {
    bool any = false;
    for (const Value* v : op->operands()) any = any || (v != nullptr && needs.count(v));
    if (!any) continue;
    for (const Value* r : op->results()) {
      if (ir::IsFloatingPoint(r->type().dtype)) needs.insert(r);
    }
  }
  return needs;
}

}  // namespace

absl::Status AppendBackward(ir::Program& program, Value* loss) {
  if (loss == nullptr) return absl::FailedPreconditionError("autodiff: the program has no loss");
  if (!program.gradients().empty()) return absl::FailedPreconditionError("autodiff: the program already has gradients");
  if (loss->type().num_elements() != 1 || !ir::IsFloatingPoint(loss->type().dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat("autodiff: loss %", loss->id(), " must be a floating-point scalar, got ", loss->type().ToString()));
  }
  const std::unordered_set<const Value*> needs_grad = ValuesNeedingGrad(program);
  const ir::OpRegistry& registry = ir::OpRegistry::Global();

  ir::Builder b(&program);
  b.set_result_role(ir::ValueRole::kGradient);
  b.set_op_role(ir::OpRole::kBackward);
  if (loss->producer() != nullptr) b.set_op_chunk(loss->producer()->chunk());
  std::unordered_map<const Value*, Value*> grads;
  PDIST_ASSIGN_OR_RETURN(grads[loss], b.Op1("full", {}, {{"shape", loss->type().shape}, {"value", 1.0},
                                                          {"dtype", loss->type().dtype}}));

  // Snapshot the forward ops: the sweep appends to the same block.
  std::vector<Operation*> forward;
  for (const auto& op : program.block().ops()) forward.push_back(op.get());

  for (auto it = forward.rbegin(); it != forward.rend(); ++it) {
    const Operation& op = **it;
    std::vector<Value*> out_grads;
    bool any_out_grad = false;
    for (const Value* r : op.results()) {
      auto g = grads.find(r);
      out_grads.push_back(g == grads.end() ? nullptr : g->second);
      any_out_grad = any_out_grad || g != grads.end();
    }
    bool any_input_needs = false;
    for (const Value* v : op.operands()) any_input_needs = any_input_needs || (v != nullptr && needs_grad.count(v));
    if (!any_out_grad || !any_input_needs) continue;

    const ir::OpDef* def = registry.Find(op.type());
    if (def == nullptr) return absl::NotFoundError(absl::StrCat("autodiff: unknown op ", op.Describe()));
    if (def->grad_kind == ir::GradKind::kNotDifferentiable) continue;
    if (def->grad_kind == ir::GradKind::kGradientOp) {
      return absl::UnimplementedError(
          absl::StrCat("autodiff: ", op.Describe(), " is a gradient op; higher-order gradients are not supported"));
    }
    b.set_op_chunk(op.chunk());  // a gradient runs in its forward op's chunk
    absl::StatusOr<std::vector<Value*>> in_grads = def->grad(b, op, out_grads);
    if (!in_grads.ok()) return WithContext(in_grads.status(), absl::StrCat("autodiff of ", op.Describe()));
    if (in_grads->size() != op.num_operands()) {
      return absl::InternalError(absl::StrCat("autodiff: gradient builder of '", op.type(), "' returned ",
                                              in_grads->size(), " gradients for ", op.num_operands(), " operands"));
    }
    for (size_t i = 0; i < op.num_operands(); ++i) {
      Value* input = op.operand(i);
      Value* g = (*in_grads)[i];
      if (input == nullptr || g == nullptr || !needs_grad.count(input)) continue;
      if (g->type() != input->type()) {
        return absl::InternalError(absl::StrCat("autodiff: gradient of operand ", i, " of ", op.Describe(), " has type ",
                                                g->type().ToString(), ", expected ", input->type().ToString()));
      }
      auto [slot, inserted] = grads.emplace(input, g);
      if (!inserted) {
        PDIST_ASSIGN_OR_RETURN(slot->second, b.Op1("add", {slot->second, g}));
      }
    }
  }

  for (Value* p : program.Parameters()) {
    auto g = grads.find(p);
    if (g != grads.end() && needs_grad.count(p)) program.add_gradient(p, g->second);
  }
  return absl::OkStatus();
}

ir::Operation* LossSeedOf(const ir::Program& program) {
  const Value* loss = program.loss();
  if (loss == nullptr) return nullptr;
  for (const auto& op : program.block().ops()) {
    if (op->role() != ir::OpRole::kBackward || op->type() != "full" || op->result(0)->type() != loss->type()) continue;
    auto value = op->attrs().find("value");
    if (value != op->attrs().end() && std::holds_alternative<double>(value->second) &&
        std::get<double>(value->second) == 1.0) {
      return op.get();
    }
  }
  return nullptr;
}

}  // namespace pdist::passes
