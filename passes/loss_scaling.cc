// ApplyLossScaling: the scaled seed, the unscale-and-count block before the first update, and
// the skip_update operand of every update (passes/loss_scaling.h).
#include "passes/loss_scaling.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ir/builder.h"
#include "ir/status.h"
#include "passes/autodiff.h"

namespace pdist::passes {

namespace {

using ir::DataType;
using ir::Operation;
using ir::Value;

// The gradient operand of an update op, by Paddle's operand orders; -1 for other ops.
int GradientOperand(const Operation& op) {
  if (op.type() == "sgd") return 2;
  if (op.type() == "momentum" || op.type() == "adamw") return 1;
  return -1;
}

size_t IndexOf(const ir::Program& program, const Operation* op) {
  const auto& ops = program.block().ops();
  return static_cast<size_t>(std::find_if(ops.begin(), ops.end(), [&](const auto& o) { return o.get() == op; }) -
                             ops.begin());
}

// Every use of `from` by ops other than `except` now reads `to`.
void ReplaceUses(ir::Program& program, Value* from, Value* to, const Operation* except) {
  for (const auto& op : program.block().ops()) {
    if (op.get() == except) continue;
    for (size_t i = 0; i < op->num_operands(); ++i) {
      if (op->operand(i) == from) op->set_operand(i, to);
    }
  }
}

// The backward of the scaled loss: every reader of the seed (d loss / d loss) reads it times the
// scale. (The seed op stays: a program's values may not be orphaned, and one multiply of a
// scalar costs nothing.)
absl::Status ScaleTheSeed(ir::Program& program, ir::Builder& b, Operation& seed, Value* scale) {
  Value* loss_grad = seed.result(0);
  b.SetOpRoleAndChunkFrom(seed);
  b.set_result_role(ir::ValueRole::kGradient);
  b.SetInsertionPoint(static_cast<int64_t>(IndexOf(program, &seed)) + 1);
  PDIST_ASSIGN_OR_RETURN(Value * factor, b.Op1("reshape", {scale}, {{"shape", loss_grad->type().shape}}));
  if (factor->type().dtype != loss_grad->type().dtype) {
    PDIST_ASSIGN_OR_RETURN(factor, b.Op1("cast", {factor}, {{"dtype", loss_grad->type().dtype}}));
  }
  PDIST_ASSIGN_OR_RETURN(Value * scaled, b.Op1("multiply", {loss_grad, factor}));
  ReplaceUses(program, loss_grad, scaled, scaled->producer());
  return absl::OkStatus();
}

struct Unscaled {
  std::vector<Value*> gradients;  // per update, in `updates` order
  Value* nonfinite = nullptr;     // how many of their elements are inf or nan
};

// Before the first update: each update's gradient in f32 (f64 for f64) times 1 / scale, and
// its inf/nan count. Counts are summed per parameter mesh first (a pipeline stage's, from
// annotate-strategy), then across meshes: each stage sends one partial sum to the stage that
// holds the scale, not one count per parameter.
absl::StatusOr<Unscaled> UnscaleAndCount(ir::Program& program, ir::Builder& b, const std::vector<Operation*>& updates,
                                         Value* scale) {
  b.SetOpRoleAndChunkFrom(*updates.front());
  b.SetInsertionPoint(static_cast<int64_t>(IndexOf(program, updates.front())));
  b.set_result_role(ir::ValueRole::kActivation);
  PDIST_ASSIGN_OR_RETURN(Value * one, b.Op1("full", {}, {{"shape", scale->type().shape}, {"value", 1.0},
                                                          {"dtype", DataType::kFloat32}}));
  PDIST_ASSIGN_OR_RETURN(Value * inverse32, b.Op1("divide", {one, scale}));
  Value* inverse64 = nullptr;
  std::map<const Value*, const Value*> param_of;  // gradient → its parameter
  for (const ir::StateUpdate& g : program.gradients()) param_of[g.new_value] = g.state;
  std::map<std::string, Value*> mesh_total;
  Unscaled out;
  for (Operation* update : updates) {
    Value* grad = update->operand(static_cast<size_t>(GradientOperand(*update)));
    auto param = param_of.find(grad);
    const std::string mesh = param != param_of.end() && param->second->dist_attr()
                                 ? param->second->dist_attr()->mesh.ToString()
                                 : "";
    b.set_result_role(ir::ValueRole::kGradient);
    Value* inverse = inverse32;
    if (grad->type().dtype == DataType::kFloat64) {
      if (inverse64 == nullptr) {
        PDIST_ASSIGN_OR_RETURN(inverse64, b.Op1("cast", {inverse32}, {{"dtype", DataType::kFloat64}}));
      }
      inverse = inverse64;
    } else if (grad->type().dtype != DataType::kFloat32) {
      // Unscaled in f32: a small f16 gradient divided by the scale would flush to zero in f16.
      PDIST_ASSIGN_OR_RETURN(grad, b.Op1("cast", {grad}, {{"dtype", DataType::kFloat32}}));
    }
    PDIST_ASSIGN_OR_RETURN(Value * g, b.Op1("multiply", {grad, inverse}));
    b.set_result_role(ir::ValueRole::kActivation);
    PDIST_ASSIGN_OR_RETURN(Value * count, b.Op1("count_nonfinite", {g}));
    Value*& total = mesh_total[mesh];
    if (total == nullptr) {
      total = count;
    } else {
      PDIST_ASSIGN_OR_RETURN(total, b.Op1("add", {total, count}));
    }
    out.gradients.push_back(g);
  }
  b.SetOpRoleAndChunkFrom(*updates.front());
  for (const auto& [mesh, sum] : mesh_total) {
    if (out.nonfinite == nullptr) {
      out.nonfinite = sum;
    } else {
      PDIST_ASSIGN_OR_RETURN(out.nonfinite, b.Op1("add", {out.nonfinite, sum}));
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<LossScalingReport> ApplyLossScaling(ir::Program& program, const LossScalingConfig& config) {
  Operation* seed = LossSeedOf(program);
  if (seed == nullptr) return absl::FailedPreconditionError("loss-scaling: the program has no backward (run autodiff first)");
  std::vector<Operation*> updates;
  for (const auto& op : program.block().ops()) {
    if (op->role() == ir::OpRole::kOptimizer && GradientOperand(*op) >= 0) updates.push_back(op.get());
  }
  if (updates.empty()) return absl::FailedPreconditionError("loss-scaling: the program has no updates (run optimizer first)");
  if (program.FindArgument(kLossScalingState) != nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("loss-scaling: the program already has '", kLossScalingState, "'"));
  }

  ir::Builder b(&program);
  const ir::TensorType scalar{{1}, DataType::kFloat32};
  Value* scale = b.State(kLossScalingState, scalar, absl::StrCat("const(", ir::DoubleToString(config.init_loss_scaling), ")"));
  Value* good = b.State("amp.good_steps", scalar, "zeros");
  Value* bad = b.State("amp.bad_steps", scalar, "zeros");
  Value* skipped = b.State(kSkippedStepsState, scalar, "zeros");
  PDIST_RETURN_IF_ERROR(ScaleTheSeed(program, b, *seed, scale));
  PDIST_ASSIGN_OR_RETURN(Unscaled unscaled, UnscaleAndCount(program, b, updates, scale));
  PDIST_ASSIGN_OR_RETURN(std::vector<Value*> next,
                         b.Create("update_loss_scaling", {unscaled.nonfinite, scale, good, bad, skipped},
                                  {{"incr_every_n_steps", config.incr_every_n_steps},
                                   {"decr_every_n_nan_or_inf", config.decr_every_n_nan_or_inf},
                                   {"incr_ratio", config.incr_ratio},
                                   {"decr_ratio", config.decr_ratio}}));
  for (size_t u = 0; u < updates.size(); ++u) {
    Operation* update = updates[u];
    update->set_operand(static_cast<size_t>(GradientOperand(*update)), unscaled.gradients[u]);
    const ir::OpDef* def = ir::OpRegistry::Global().Find(update->type());
    while (update->num_operands() + 1 < def->inputs.size()) update->add_operand(nullptr);
    update->add_operand(next[0]);  // skip_update: found_inf_out
  }
  program.add_update(scale, next[1]);
  program.add_update(good, next[2]);
  program.add_update(bad, next[3]);
  program.add_update(skipped, next[4]);
  return LossScalingReport{static_cast<int64_t>(updates.size())};
}

}  // namespace pdist::passes
