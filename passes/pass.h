// Pass: one named transformation of a Program, with typed options and a shared PassContext.
//
//   class DropLossPass : public Pass {
//    public:
//     std::string_view name() const override { return "drop-loss"; }
//     absl::StatusOr<bool> Run(ir::Program& p, PassContext&) override {
//       const bool changed = p.loss() != nullptr;
//       p.set_loss(nullptr);
//       return changed;
//     }
//   };
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ir/program.h"
#include "passes/reshard_plan.h"
#include "strategy/strategy.h"

namespace pdist::passes {

// key=value options of one pass as the pipeline text gives them: `optimizer{type=sgd}`.
// Ordered so that printing is deterministic.
using PassOptions = std::map<std::string, std::string>;

// What `micro-batch` did, for the runner that feeds the program whole batches: cut each of
// `split_inputs` along dim 0 into `count` micro-batches.
struct MicroBatching {
  int64_t count = 1;
  std::vector<std::string> split_inputs;
};

// State shared by the passes of one PassManager run.
struct PassContext {
  // Options of the whole run (a tool's flags, e.g. `strategy=plan.json`), for passes that need
  // more than their own pipeline options.
  PassOptions options;
  // The run's strategy (pdist-opt --strategy, the engine's): passes whose pipeline options leave
  // a choice open take it from here (annotate-strategy without options).
  strategy::Strategy strategy;
  // Reshard plans shared by the `partition` runs of every rank (nullptr: each pass plans its own).
  ReshardPlanCache* reshard_plans = nullptr;
  // Set by `micro-batch`.
  std::optional<MicroBatching> micro_batching;
  // Whether passes record a line per decision (completion: one per value) besides their
  // summary; pdist-opt --explain sets it, the engine does not pay for it.
  bool explain_each = false;
  // Why passes did what they did, one line each ("autodiff: 6 grad ops for 2 parameters"), for
  // `--explain` and IR dumps.
  std::vector<std::string> explanations;

  void Explain(std::string_view pass, std::string_view message) {
    explanations.push_back(std::string(pass) + ": " + std::string(message));
  }
};

class Pass {
 public:
  virtual ~Pass() = default;

  // The registered name, as written in pipelines ("autodiff").
  virtual std::string_view name() const = 0;
  // The pass's options in pipeline form; parsing them back must configure an identical pass.
  virtual PassOptions options() const { return {}; }
  // Transforms `program`; returns whether it changed. An error leaves the program in an
  // unspecified (but destructible) state: callers that continue must keep a copy.
  virtual absl::StatusOr<bool> Run(ir::Program& program, PassContext& context) = 0;
};

// Typed access to PassOptions; Finish() rejects keys no Read asked for, so a misspelt option
// is an error naming it instead of being ignored.
//
//   PassOptionReader r("optimizer", options);
//   PDIST_RETURN_IF_ERROR(r.Read("beta1", &config.beta1));   // absent: left unchanged
//   PDIST_RETURN_IF_ERROR(r.Finish());
class PassOptionReader {
 public:
  PassOptionReader(std::string pass, const PassOptions& options) : pass_(std::move(pass)), options_(options) {}
  // It keeps a reference: options made for the call would be gone before the first Read.
  PassOptionReader(std::string pass, PassOptions&& options) = delete;

  absl::Status Read(const std::string& key, std::string* value);
  absl::Status Read(const std::string& key, double* value);
  absl::Status Read(const std::string& key, int64_t* value);
  absl::Status Read(const std::string& key, bool* value);  // true|false|1|0
  // Optional forms: nullopt unless the options give `key`; a given integer below `min` is an
  // error naming the pass, the option and the value.
  absl::Status Read(const std::string& key, std::optional<int64_t>* value, int64_t min);
  absl::Status Read(const std::string& key, std::optional<bool>* value);
  absl::Status Finish() const;

 private:
  const std::string* Find(const std::string& key);

  std::string pass_;
  const PassOptions& options_;
  std::vector<std::string> known_;
};

}  // namespace pdist::passes
