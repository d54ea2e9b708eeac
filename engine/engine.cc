// Engine: program preparation, train/eval steps, fit loop, checkpoints.
#include "engine/engine.h"

#include <chrono>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "engine/checkpoint.h"
#include "engine/strategy_check.h"
#include "ir/status.h"
#include "ir/verifier.h"
#include "passes/autodiff.h"

namespace pdist::engine {

double LearningRateSchedule::At(int64_t step) const {
  if (warmup_steps > 0 && step < warmup_steps) return base * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  if (decay_steps <= 0) return base;
  const double t = std::min(1.0, static_cast<double>(step - warmup_steps) / static_cast<double>(decay_steps));
  const double cosine = 0.5 * (1.0 + std::cos(3.141592653589793 * t));
  return base * (min_ratio + (1.0 - min_ratio) * cosine);
}

Engine::Engine(ir::Program forward, ir::Program train, EngineOptions options)
    : forward_(std::move(forward)), train_(std::move(train)), options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(ir::Program forward, EngineOptions options) {
  PDIST_RETURN_IF_ERROR(CheckSingleRankStrategy(options.strategy_json));
  if (forward.loss() == nullptr) return absl::InvalidArgumentError("the model has no loss");
  if (!forward.gradients().empty() || !forward.updates().empty()) {
    return absl::InvalidArgumentError("the model already has backward or optimizer ops; give the forward program");
  }
  PDIST_RETURN_IF_ERROR(Annotate(ir::VerifyProgram(forward), "model"));
  ir::Program train = forward.Clone();
  auto engine = std::unique_ptr<Engine>(new Engine(std::move(forward), std::move(train), std::move(options)));
  PDIST_RETURN_IF_ERROR(engine->Prepare());
  return engine;
}

absl::Status Engine::Prepare() {
  PDIST_RETURN_IF_ERROR(passes::AppendBackward(train_, train_.loss()));
  PDIST_RETURN_IF_ERROR(passes::AppendOptimizer(train_, options_.optimizer));
  PDIST_RETURN_IF_ERROR(Annotate(ir::VerifyProgram(train_), "training program"));
  exec::ExecutorOptions train_options;
  train_options.profile = options_.profile;
  PDIST_ASSIGN_OR_RETURN(exec::Executor train, exec::Executor::Create(train_, train_options));
  PDIST_ASSIGN_OR_RETURN(exec::Executor eval, exec::Executor::Create(forward_));
  train_executor_ = std::make_unique<exec::Executor>(std::move(train));
  eval_executor_ = std::make_unique<exec::Executor>(std::move(eval));
  PDIST_RETURN_IF_ERROR(exec::InitializeWorkspace(train_, options_.seed, workspace_));
  for (const ir::Value* arg : forward_.block().arguments()) {
    if (arg->role() == ir::ValueRole::kDataInput) {
      tokens_per_step_ = arg->type().num_elements();
      break;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<StepResult> Engine::TrainStep(const exec::Feeds& feeds) {
  exec::Feeds all = feeds;
  const ir::Value* lr_value = train_.FindArgument(passes::kLearningRateFeed);
  StepResult result;
  result.step = step_;
  result.lr = options_.lr.At(step_);
  all[passes::kLearningRateFeed] = exec::Tensor::Scalar(lr_value->type().dtype, result.lr);
  const auto start = std::chrono::steady_clock::now();
  // Run on a copy of the workspace map (tensors are shared, not copied), so that a failing
  // step leaves the parameters as they were.
  exec::Workspace next = workspace_;
  PDIST_ASSIGN_OR_RETURN(exec::RunResult run, train_executor_->Run(all, next));
  if (!std::isfinite(run.loss)) {
    return absl::InvalidArgumentError(absl::StrCat("loss is ", run.loss, " at step ", step_,
                                                   " (diverged: lower the learning rate)"));
  }
  workspace_ = std::move(next);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.loss = run.loss;
  result.peak_bytes = run.peak_bytes;
  result.op_seconds = std::move(run.op_seconds);
  ++step_;
  return result;
}

absl::StatusOr<double> Engine::EvalStep(const exec::Feeds& feeds) const {
  exec::Workspace ws = workspace_;  // shares tensors; eval writes nothing back
  PDIST_ASSIGN_OR_RETURN(exec::RunResult run, eval_executor_->Run(feeds, ws));
  return run.loss;
}

absl::StatusOr<std::vector<StepResult>> Engine::Fit(const BatchSource& next_batch, int64_t steps,
                                                    const StepCallback& on_step) {
  std::vector<StepResult> results;
  for (int64_t i = 0; i < steps; ++i) {
    PDIST_ASSIGN_OR_RETURN(exec::Feeds feeds, next_batch());
    PDIST_ASSIGN_OR_RETURN(StepResult r, TrainStep(feeds));
    results.push_back(r);
    if (on_step && !on_step(r)) break;
  }
  return results;
}

absl::StatusOr<double> Engine::Evaluate(const BatchSource& next_batch, int64_t steps) const {
  if (steps <= 0) return absl::InvalidArgumentError(absl::StrCat("evaluate: steps must be positive, got ", steps));
  double total = 0;
  for (int64_t i = 0; i < steps; ++i) {
    PDIST_ASSIGN_OR_RETURN(exec::Feeds feeds, next_batch());
    PDIST_ASSIGN_OR_RETURN(double loss, EvalStep(feeds));
    total += loss;
  }
  return total / static_cast<double>(steps);
}

absl::Status Engine::Save(const std::string& path) const {
  return SaveCheckpoint(Checkpoint{step_, workspace_}, path);
}

absl::Status Engine::Load(const std::string& path) {
  PDIST_ASSIGN_OR_RETURN(Checkpoint ckpt, LoadCheckpoint(path));
  for (const auto& [name, t] : workspace_) {
    auto it = ckpt.tensors.find(name);
    if (it == ckpt.tensors.end()) {
      return absl::InvalidArgumentError(absl::StrCat("checkpoint '", path, "' has no tensor '", name, "'"));
    }
    if (it->second.type() != t.type()) {
      return absl::InvalidArgumentError(absl::StrCat("checkpoint '", path, "': tensor '", name, "' is ",
                                                     it->second.type().ToString(), ", the model has ",
                                                     t.type().ToString()));
    }
  }
  for (const auto& [name, t] : ckpt.tensors) {
    if (!workspace_.count(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint '", path, "' has tensor '", name, "' that the model does not have"));
    }
  }
  workspace_ = std::move(ckpt.tensors);
  step_ = ckpt.step;
  return absl::OkStatus();
}

}  // namespace pdist::engine
