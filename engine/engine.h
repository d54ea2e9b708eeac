// Engine: prepares a forward program for training (autodiff + optimizer), owns the parameters
// and optimizer states, and runs train / eval steps, fit loops and checkpoints.
//
//   PDIST_ASSIGN_OR_RETURN(ir::Program model, ir::LoadProgramAuto("model.pb"));
//   PDIST_ASSIGN_OR_RETURN(auto engine, Engine::Create(std::move(model), EngineOptions{}));
//   PDIST_ASSIGN_OR_RETURN(StepResult r, engine->TrainStep(feeds));
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "executor/executor.h"
#include "ir/program.h"
#include "passes/optimizer.h"

namespace pdist::engine {

struct LearningRateSchedule {
  double base = 1e-3;
  int64_t warmup_steps = 0;  // linear warm-up from base/warmup_steps
  int64_t decay_steps = 0;   // cosine decay to `min_ratio`·base over this many steps; 0 = constant
  double min_ratio = 0.1;
  double At(int64_t step) const;
};

struct EngineOptions {
  passes::OptimizerConfig optimizer;
  LearningRateSchedule lr;
  uint64_t seed = 1;           // parameter initialisation
  std::string strategy_json;   // optional; see docs/strategy.md
  bool profile = false;        // time kernels: StepResult::op_seconds
};

struct StepResult {
  int64_t step = 0;    // 0-based index of the step just run
  double loss = 0;
  double lr = 0;
  double seconds = 0;  // wall time of the step
  int64_t peak_bytes = 0;
  std::map<std::string, double> op_seconds;  // kernel time per op type (EngineOptions::profile)
};

class Engine {
 public:
  // Takes the forward program (data inputs, parameters, ops, a scalar loss).
  static absl::StatusOr<std::unique_ptr<Engine>> Create(ir::Program forward, EngineOptions options);

  // One optimizer step on `feeds` (every data input of the model except the learning rate).
  absl::StatusOr<StepResult> TrainStep(const exec::Feeds& feeds);
  // The loss on `feeds`, parameters unchanged.
  absl::StatusOr<double> EvalStep(const exec::Feeds& feeds) const;

  // Runs `steps` train steps on batches from `next_batch`; `on_step` may return false to stop.
  using BatchSource = std::function<absl::StatusOr<exec::Feeds>()>;
  using StepCallback = std::function<bool(const StepResult&)>;
  absl::StatusOr<std::vector<StepResult>> Fit(const BatchSource& next_batch, int64_t steps, const StepCallback& on_step);
  // Mean loss over `steps` batches.
  absl::StatusOr<double> Evaluate(const BatchSource& next_batch, int64_t steps) const;

  absl::Status Save(const std::string& path) const;
  // Restores parameters, optimizer states and the step counter; every tensor must match.
  absl::Status Load(const std::string& path);

  const ir::Program& forward_program() const { return forward_; }
  const ir::Program& train_program() const { return train_; }
  const exec::Workspace& workspace() const { return workspace_; }
  int64_t step() const { return step_; }
  // Tokens (elements of the first data input) per step, for throughput.
  int64_t tokens_per_step() const { return tokens_per_step_; }

 private:
  Engine(ir::Program forward, ir::Program train, EngineOptions options);
  absl::Status Prepare();

  ir::Program forward_;
  ir::Program train_;
  EngineOptions options_;
  std::unique_ptr<exec::Executor> train_executor_;
  std::unique_ptr<exec::Executor> eval_executor_;
  exec::Workspace workspace_;
  int64_t step_ = 0;
  int64_t tokens_per_step_ = 0;
};

}  // namespace pdist::engine
