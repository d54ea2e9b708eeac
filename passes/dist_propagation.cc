// Forward and reverse sweeps of the SPMD rules over a program, to a fixed point.
#include "passes/dist_propagation.h"

#include "absl/strings/str_cat.h"
#include "ir/status.h"

namespace pdist::passes {
namespace {

// Whether a reverse proposal could change an operand of `op` (one is there and not fixed).
bool AnyOperandOpen(const ir::Operation& op, const DistState& state) {
  for (const ir::Value* v : op.operands()) {
    if (v != nullptr && !state.at(v).fixed) return true;
  }
  return false;
}

absl::StatusOr<bool> ForwardSweep(const ir::Program& program, DistState& state) {
  bool changed = false;
  for (const auto& op : program.block().ops()) {
    const MeshId mesh = state.OpMesh(*op);
    if (mesh < 0) continue;  // nothing reached this op yet
    PDIST_ASSIGN_OR_RETURN(const ir::SpmdResult* r, state.RunRule(*op, mesh, SpmdDirection::kForward));
    for (size_t j = 0; j < op->num_results(); ++j) {
      changed |= state.Propose(op->result(j), mesh, r->outputs[j].dims_mapping, r->outputs[j].partial,
                               DistOrigin::Forward(op.get(), static_cast<int>(j)));
    }
  }
  return changed;
}

absl::StatusOr<bool> ReverseSweep(const ir::Program& program, DistState& state) {
  bool changed = false;
  const auto& ops = program.block().ops();
  for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
    const ir::Operation& op = **it;
    const MeshId mesh = state.OpMesh(op);
    if (mesh < 0 || !AnyOperandOpen(op, state)) continue;
    PDIST_ASSIGN_OR_RETURN(const ir::SpmdResult* r, state.RunRule(op, mesh, SpmdDirection::kReverse));
    for (size_t i = 0; i < op.num_operands(); ++i) {
      if (op.operand(i) == nullptr) continue;
      // Partial is the producer's business; a consumer only says how the dims are split.
      changed |= state.Propose(op.operand(i), mesh, r->inputs[i].dims_mapping, {},
                               DistOrigin::Reverse(&op, static_cast<int>(i)));
    }
  }
  // `update s <- v`: s takes v's DistAttr after the step, so s should start out like v.
  for (size_t u = 0; u < program.updates().size(); ++u) {
    const ir::StateUpdate& update = program.updates()[u];
    const ValueDist& value = state.at(update.new_value);
    if (!value.known()) continue;
    changed |= state.Propose(update.state, value.mesh, value.dims_mapping, {},
                             {DistOrigin::Kind::kUpdate, nullptr, static_cast<int>(u)});
  }
  return changed;
}

}  // namespace

absl::StatusOr<int> PropagateDistAttrs(const ir::Program& program, DistState& state, int max_rounds) {
  for (int round = 1; round <= max_rounds; ++round) {
    PDIST_ASSIGN_OR_RETURN(bool forward, ForwardSweep(program, state));
    PDIST_ASSIGN_OR_RETURN(bool reverse, ReverseSweep(program, state));
    if (!forward && !reverse) return round;
  }
  return absl::InternalError(
      absl::StrCat("completion: DistAttrs still change after ", max_rounds, " rounds of propagation"));
}

bool FillUnreached(const ir::Program& program, DistState& state) {
  // Meshes are interned in canonical value order, so the first is that of the first value (in
  // that order) that has a DistAttr.
  const MeshId first = state.first_mesh();
  if (first < 0) return false;
  auto fill = [&state, first](const ir::Value* v) {
    ValueDist& s = state.at(v);
    if (s.known()) return;
    s.mesh = first;
    s.dims_mapping.assign(v->type().shape.size(), -1);
    s.partial.clear();
    s.origin.kind = DistOrigin::Kind::kDefault;
  };
  for (const ir::Value* v : program.block().arguments()) fill(v);
  for (const auto& op : program.block().ops()) {
    for (const ir::Value* r : op->results()) fill(r);
  }
  return true;
}

}  // namespace pdist::passes
