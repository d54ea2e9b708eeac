// Appends optimizer update ops for every recorded (parameter, gradient) pair.
//
//   gradient %1 <- %40      →   %50 = state "w.moment1" ... ; %53, ... = adamw(%1, %40, %lr, ...)
//                               update %1 <- %53 ; update %50 <- %54 ; ...
#pragma once

#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ir/program.h"

namespace pdist::passes {

enum class OptimizerType { kSgd, kMomentum, kAdamW };

// Hyper-parameters, named as Paddle's optimizer arguments. The learning rate itself is fed each
// step as the data input "learning_rate" (a scalar), so schedules need no program change.
struct OptimizerConfig {
  OptimizerType type = OptimizerType::kAdamW;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
  double weight_decay = 0.01;  // adamw's coeff (decoupled), momentum's regularization_coeff
  double momentum = 0.9;       // momentum's mu
  bool use_nesterov = false;
};

absl::StatusOr<OptimizerType> ParseOptimizerType(const std::string& name);  // sgd | momentum | adamw
// OK where every hyper-parameter is one an optimizer can run with — the ranges PyTorch's
// optimizers check at construction: betas in [0, 1), epsilon, weight_decay and momentum >= 0,
// all finite; otherwise an error naming the field and its value ("beta1 1.5 must be in [0, 1)").
absl::Status CheckOptimizerConfig(const OptimizerConfig& config);
std::string OptimizerTypeName(OptimizerType type);

// The `optimizer` pass's options for `config`: the type always (so a pipeline says which
// optimizer runs), the other fields where they differ from OptimizerConfig's defaults.
//   {.type = kSgd}  →  {{"type", "sgd"}}
std::map<std::string, std::string> OptimizerPassOptions(const OptimizerConfig& config);

// Name of the learning-rate feed.
inline constexpr char kLearningRateFeed[] = "learning_rate";

// Needs program.gradients() (run AppendBackward first). Creates the optimizer states as
// arguments named "<param>.moment1", "<param>.moment2", "<param>.beta1_pow", "<param>.beta2_pow",
// "<param>.velocity", and `update` bindings for the parameter and each state.
//
// A bf16/f16 parameter (mixed precision, passes/amp.h) is updated through an f32 master weight
// "<param>.master" (initialised cast_of(<param>)): the update op reads the master, the
// low-precision gradient and f32 states, and the parameter's new value is the master rounded:
//   %m = state "w.master" : f32[64,64] {init = "cast_of(w)"}
//   %9, ... = adamw(%m, %w_grad_bf16, %lr, ...)  ;  %14 = cast(%9) {dtype = bf16}
//   update %w <- %14 ; update %m <- %9 ; ...
// Every gradient is ready before the first update, so a pass that must read all of them first
// (passes/loss_scaling.h) can go between.
absl::Status AppendOptimizer(ir::Program& program, const OptimizerConfig& config);

}  // namespace pdist::passes
