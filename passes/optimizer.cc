// AppendOptimizer: one sgd / momentum / adamw op per trainable parameter.
#include "passes/optimizer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "ir/attribute.h"
#include "ir/builder.h"
#include "ir/status.h"

namespace pdist::passes {

absl::StatusOr<OptimizerType> ParseOptimizerType(const std::string& name) {
  if (name == "sgd") return OptimizerType::kSgd;
  if (name == "momentum") return OptimizerType::kMomentum;
  if (name == "adamw") return OptimizerType::kAdamW;
  return absl::InvalidArgumentError(absl::StrCat("unknown optimizer '", name, "' (expected sgd, momentum or adamw)"));
}

std::string OptimizerTypeName(OptimizerType type) {
  switch (type) {
    case OptimizerType::kSgd: return "sgd";
    case OptimizerType::kMomentum: return "momentum";
    case OptimizerType::kAdamW: return "adamw";
  }
  return "?";
}

namespace {


// The dtype the update runs in: f32 for a low-precision parameter (its master weight), else its own.
ir::DataType UpdateDtype(ir::DataType param) { return ir::ComputeDtype(param); }

}  // namespace

absl::Status CheckOptimizerConfig(const OptimizerConfig& config) {
  auto in = [](const char* field, double value, double low, double high, const char* range) -> absl::Status {
    if (std::isfinite(value) && value >= low && value < high) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(field, " ", value, " must be ", range));
  };
  constexpr double kInf = std::numeric_limits<double>::infinity();
  PDIST_RETURN_IF_ERROR(in("beta1", config.beta1, 0, 1, "in [0, 1)"));
  PDIST_RETURN_IF_ERROR(in("beta2", config.beta2, 0, 1, "in [0, 1)"));
  // AdamW divides by sqrt(v) + epsilon: with 0, a parameter whose gradient is 0 (an embedding
  // row no batch reads) gets 0/0 and the run diverges at once.
  if (!(config.epsilon > 0 && std::isfinite(config.epsilon))) {
    return absl::InvalidArgumentError(absl::StrCat("epsilon ", config.epsilon, " must be > 0 and finite (AdamW divides "
                                                   "by sqrt(v) + epsilon; 1e-8 is the usual)"));
  }
  PDIST_RETURN_IF_ERROR(in("weight_decay", config.weight_decay, 0, kInf, ">= 0 and finite"));
  return in("momentum", config.momentum, 0, kInf, ">= 0 and finite");
}

namespace {

// Whether a trainable parameter is among what `loss` is computed from through floating-point
// values (an integer value carries no gradient: a cast to one cuts the path).
bool AnyTrainableReaches(const ir::Value& loss) {
  std::vector<const ir::Value*> work = {&loss};
  std::set<const ir::Value*> seen = {&loss};
  while (!work.empty()) {
    const ir::Value* v = work.back();
    work.pop_back();
    if (!ir::IsFloatingPoint(v->type().dtype)) continue;
    if (v->role() == ir::ValueRole::kParameter && v->trainable()) return true;
    if (v->producer() == nullptr) continue;
    for (const ir::Value* operand : v->producer()->operands()) {
      if (operand != nullptr && seen.insert(operand).second) work.push_back(operand);
    }
  }
  return false;
}

}  // namespace

absl::Status AppendOptimizer(ir::Program& program, const OptimizerConfig& config) {
  if (program.gradients().empty()) {
    const std::vector<ir::Value*> parameters = program.Parameters();
    if (!parameters.empty() &&
        std::none_of(parameters.begin(), parameters.end(), [](const ir::Value* p) { return p->trainable(); })) {
      return absl::FailedPreconditionError(absl::StrCat(
          "optimizer: every one of the program's ", parameters.size(),
          " parameters is frozen (trainable = false): there is nothing to train; leave one trainable "
          "(pdist-import --frozen, pdist.import_onnx(frozen=...))"));
    }
    if (parameters.empty()) {
      return absl::FailedPreconditionError(
          "optimizer: the program has no parameters: there is nothing to train (the loss is computed from the data "
          "alone)");
    }
    if (program.loss() != nullptr && !AnyTrainableReaches(*program.loss())) {
      return absl::FailedPreconditionError(absl::StrCat(
          "optimizer: none of the program's ", parameters.size(),
          " parameters reaches the loss through an op with a gradient: there is nothing to train "
          "(is the loss computed from the data alone, or through an integer cast?)"));
    }
    return absl::FailedPreconditionError("optimizer: the program has no gradients (run autodiff first)");
  }
  if (!program.updates().empty()) return absl::FailedPreconditionError("optimizer: the program already has updates");
  ir::Builder b(&program);
  b.set_op_role(ir::OpRole::kOptimizer);
  const ir::DataType lr_dtype = UpdateDtype(program.gradients().front().state->type().dtype);
  ir::Value* lr = program.FindArgument(kLearningRateFeed);
  if (lr == nullptr) lr = b.Data(kLearningRateFeed, {{}, lr_dtype});

  // Mixed precision: a low-precision parameter is updated as an f32 master weight, reading its
  // low-precision gradient (the update ops accept one for an f32 param), and becomes the master
  // rounded (Micikevicius et al., 2018; Paddle's multi_precision).
  struct Target {
    ir::Value* param;      // the parameter, or its master weight
    ir::Value* grad;
    ir::Value* low_param;  // the low-precision parameter the master rounds to, or null
  };
  std::vector<Target> targets;
  for (const ir::StateUpdate& pg : program.gradients()) {
    if (!ir::IsLowPrecisionFloat(pg.state->type().dtype)) {
      targets.push_back({pg.state, pg.new_value, nullptr});
      continue;
    }
    const std::string& name = pg.state->name();
    ir::Value* master = b.State(name + ".master", {pg.state->type().shape, ir::DataType::kFloat32}, absl::StrCat("cast_of(", name, ")"));
    targets.push_back({master, pg.new_value, pg.state});
  }
  for (const auto& [param, grad, low_param] : targets) {
    const std::string& name = low_param != nullptr ? low_param->name() : param->name();
    const ir::TensorType& type = param->type();
    std::vector<ir::Value*> results;
    std::vector<ir::Value*> states;
    switch (config.type) {
      case OptimizerType::kSgd: {
        PDIST_ASSIGN_OR_RETURN(results, b.Create("sgd", {param, lr, grad}));
        break;
      }
      case OptimizerType::kMomentum: {
        ir::Value* velocity = b.State(name + ".velocity", type, "zeros");
        states = {velocity};
        PDIST_ASSIGN_OR_RETURN(results, b.Create("momentum", {param, grad, velocity, lr},
                                                 {{"mu", config.momentum},
                                                  {"use_nesterov", config.use_nesterov},
                                                  {"regularization_coeff", config.weight_decay}}));
        break;
      }
      case OptimizerType::kAdamW: {
        const ir::TensorType pow_type{{1}, type.dtype};
        states = {b.State(name + ".moment1", type, "zeros"), b.State(name + ".moment2", type, "zeros"),
                  b.State(name + ".beta1_pow", pow_type, absl::StrCat("const(", ir::DoubleToString(config.beta1), ")")),
                  b.State(name + ".beta2_pow", pow_type, absl::StrCat("const(", ir::DoubleToString(config.beta2), ")"))};
        PDIST_ASSIGN_OR_RETURN(results, b.Create("adamw", {param, grad, lr, states[0], states[1], states[2], states[3]},
                                                 {{"beta1", config.beta1},
                                                  {"beta2", config.beta2},
                                                  {"epsilon", config.epsilon},
                                                  {"coeff", config.weight_decay}}));
        break;
      }
    }
    if (low_param != nullptr) {
      PDIST_ASSIGN_OR_RETURN(ir::Value * rounded, b.Op1("cast", {results.at(0)}, {{"dtype", low_param->type().dtype}}));
      program.add_update(low_param, rounded);
    }
    program.add_update(param, results.at(0));
    for (size_t i = 0; i < states.size(); ++i) program.add_update(states[i], results.at(i + 1));
  }
  return absl::OkStatus();
}

std::map<std::string, std::string> OptimizerPassOptions(const OptimizerConfig& config) {
  const OptimizerConfig defaults;
  std::map<std::string, std::string> options = {{"type", OptimizerTypeName(config.type)}};
  auto put = [&options](const char* key, double value, double default_value) {
    if (value != default_value) options[key] = ir::DoubleToString(value);
  };
  put("beta1", config.beta1, defaults.beta1);
  put("beta2", config.beta2, defaults.beta2);
  put("epsilon", config.epsilon, defaults.epsilon);
  put("weight_decay", config.weight_decay, defaults.weight_decay);
  put("momentum", config.momentum, defaults.momentum);
  if (config.use_nesterov != defaults.use_nesterov) options["use_nesterov"] = config.use_nesterov ? "true" : "false";
  return options;
}

}  // namespace pdist::passes
