// CompleteDistAttrs: propagation, defaults, reshard insertion, write-back and explanations.
#include "passes/completion.h"

#include "absl/strings/str_cat.h"
#include "ir/printer.h"
#include "ir/status.h"
#include "passes/dist_propagation.h"
#include "passes/dist_state.h"
#include "passes/reshard_insertion.h"

namespace pdist::passes {
namespace {

std::string Why(const ir::Value& v, const ValueDist& s, const ir::Program& program, const ir::ValueNumbering& n) {
  using Kind = DistOrigin::Kind;
  const DistOrigin& o = s.origin;
  switch (o.kind) {
    case Kind::kAnnotation:
      return v.producer() != nullptr && IsReshard(*v.producer())
                 ? absl::StrCat("annotated; made by ", DescribeOp(*v.producer(), n))
                 : "annotated";
    case Kind::kInput:
      return "kept from the input program";
    case Kind::kReshardTarget:
      return "the target written on its reshard";
    case Kind::kForward:
      return absl::StrCat("forward: ", DescribeOp(*o.op, n));
    case Kind::kReverse:
      return absl::StrCat("reverse: operand ", o.index, " of ", DescribeOp(*o.op, n));
    case Kind::kUpdate:
    case Kind::kReshardInserted: {
      const char* what = o.kind == Kind::kUpdate ? "like its update value" : "reshard inserted for";
      if (o.op != nullptr) return absl::StrCat(what, " operand ", o.index, " of ", DescribeOp(*o.op, n));
      const ir::StateUpdate& u = program.updates().at(static_cast<size_t>(o.index));
      return absl::StrCat(what, " `update ", n.Name(u.state), " <- ", n.Name(u.new_value), "`");
    }
    case Kind::kReshardChosen:
      return absl::StrCat("its reshard has no target written: what its first use needs, operand ", o.index, " of ",
                          DescribeOp(*o.op, n));
    case Kind::kDefault:
      return "reached from no annotation: Replicate on the first mesh";
    case Kind::kUnset:
      break;
  }
  return "unset";
}

std::vector<std::string> Explain(const ir::Program& program, const DistState& state) {
  const ir::ValueNumbering n(program);
  std::vector<std::string> lines;
  lines.reserve(static_cast<size_t>(n.size()));
  auto add = [&](const ir::Value* v) {
    const ValueDist& s = state.at(v);
    const std::string attr = v->dist_attr() ? v->dist_attr()->ToString() : "{}";
    lines.push_back(absl::StrCat(n.Name(v), " ", attr, " ← ", Why(*v, s, program, n)));
  };
  for (const ir::Value* v : program.block().arguments()) add(v);
  for (const auto& op : program.block().ops()) {
    for (const ir::Value* r : op->results()) add(r);
  }
  return lines;
}

bool AnyDistAttr(const ir::Program& program) {
  for (const ir::Value* v : program.block().arguments()) {
    if (v->dist_attr()) return true;
  }
  for (const auto& op : program.block().ops()) {
    for (const ir::Value* r : op->results()) {
      if (r->dist_attr()) return true;
    }
  }
  return false;
}

}  // namespace

absl::StatusOr<CompletionReport> CompleteDistAttrs(ir::Program& program, const CompletionOptions& options) {
  CompletionReport report;
  // Without any DistAttr there is no mesh to complete on.
  if (!AnyDistAttr(program)) return report;
  DistState state(program);
  PDIST_ASSIGN_OR_RETURN(report.rounds, PropagateDistAttrs(program, state, options.max_rounds));
  FillUnreached(program, state);
  PDIST_ASSIGN_OR_RETURN(report.reshards, InsertReshards(program, state));

  report.changed = report.reshards > 0;
  auto write = [&](ir::Value* v) {
    const ValueDist& s = state.at(v);
    const std::optional<ir::DistAttr>& old = v->dist_attr();
    if (old && old->dims_mapping == s.dims_mapping && old->partial == s.partial && old->mesh == state.mesh(s.mesh)) {
      return;
    }
    v->set_dist_attr(state.AttrOf(v));
    report.changed = true;
  };
  for (ir::Value* v : program.block().arguments()) write(v);
  for (const auto& op : program.block().ops()) {
    for (ir::Value* r : op->results()) write(r);
  }
  if (options.explain) report.explanations = Explain(program, state);
  return report;
}

}  // namespace pdist::passes
