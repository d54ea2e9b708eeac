// CountParameters / CountFlops.
#include "ir/models/model_stats.h"

#include <algorithm>

#include "ir/op_def.h"
#include "ir/status.h"

namespace pdist::ir::models {
namespace {

bool IsGradient(const Value* v) { return v != nullptr && v->role() == ValueRole::kGradient; }

}  // namespace

int64_t CountParameters(const Program& program) {
  int64_t count = 0;
  for (const Value* p : program.Parameters()) count += p->type().num_elements();
  return count;
}

int64_t CountTrainableParameters(const Program& program) {
  int64_t count = 0;
  for (const Value* p : program.Parameters()) count += p->trainable() ? p->type().num_elements() : 0;
  return count;
}

absl::StatusOr<FlopCount> CountFlops(const Program& program) {
  FlopCount flops;
  for (const auto& op : program.block().ops()) {
    PDIST_ASSIGN_OR_RETURN(const OpDef* def, OpRegistry::Global().Lookup(op->type()));
    InputTypes inputs;
    for (const Value* v : op->operands()) inputs.push_back(v ? &v->type() : nullptr);
    std::vector<TensorType> outputs;
    for (const Value* v : op->results()) outputs.push_back(v->type());
    const OpCost cost = def->cost(inputs, outputs, op->attrs());
    const double f = cost.flops;
    flops.by_op[op->type()] += f;
    if (std::any_of(op->results().begin(), op->results().end(), IsGradient)) {
      flops.backward += f;
    } else if (std::any_of(op->operands().begin(), op->operands().end(), IsGradient)) {
      flops.optimizer += f;
    } else {
      flops.forward += f;
      flops.forward_model += cost.ModelFlops();
    }
  }
  return flops;
}

absl::StatusOr<double> CountForwardFlops(const Program& program) {
  PDIST_ASSIGN_OR_RETURN(FlopCount flops, CountFlops(program));
  return flops.forward;
}

absl::StatusOr<double> CountForwardModelFlops(const Program& program) {
  PDIST_ASSIGN_OR_RETURN(FlopCount flops, CountFlops(program));
  return flops.forward_model;
}

}  // namespace pdist::ir::models
