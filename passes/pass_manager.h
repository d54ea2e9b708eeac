// PassManager: runs a pipeline of passes, verifying, printing and timing on request.
//
//   PassManager pm({.print_after_all = &std::cerr});
//   PDIST_RETURN_IF_ERROR(pm.AddPipeline("autodiff,optimizer{type=adamw}"));
//   PassContext context;
//   PDIST_ASSIGN_OR_RETURN(bool changed, pm.Run(program, context));
//   pm.Pipeline();   // "autodiff,optimizer{type=adamw}"
#pragma once

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "passes/pass.h"
#include "passes/pass_registry.h"

namespace pdist::passes {

struct PassManagerOptions {
  // Verify the input and the program after every pass; an error names the pass that broke it.
  bool verify_each = true;
  // Where to print the IR before / after each pass (nullptr: not printed). Each dump starts
  // with a `// -----// IR after <pass> //----- //` comment line, so a dump parses back.
  std::ostream* print_before_all = nullptr;
  std::ostream* print_after_all = nullptr;
  // Record each pass's wall time (see timings() and TimingReport()).
  bool time_passes = false;
};

struct PassTiming {
  std::string pass;  // as in the pipeline: "optimizer{type=sgd}"
  double seconds = 0;
  bool changed = false;
};

class PassManager {
 public:
  explicit PassManager(PassManagerOptions options = {}) : options_(options) {}

  void AddPass(std::unique_ptr<Pass> pass) { passes_.push_back(std::move(pass)); }
  // Appends the passes of a pipeline text, created through `registry`.
  absl::Status AddPipeline(std::string_view pipeline, const PassRegistry& registry = PassRegistry::Global());

  // Runs every pass in order; returns whether any changed the program. Stops at the first
  // error, annotated with the pass: "pass 'optimizer': the program has no gradients ...".
  absl::StatusOr<bool> Run(ir::Program& program, PassContext& context);

  // The pipeline text that AddPipeline reads back into the same passes.
  std::string Pipeline() const;
  const std::vector<PassTiming>& timings() const { return timings_; }
  // "  0.0012 s  autodiff\n ... total"; empty unless time_passes was set.
  std::string TimingReport() const;

 private:
  PassManagerOptions options_;
  std::vector<std::unique_ptr<Pass>> passes_;
  std::vector<PassTiming> timings_;
};

}  // namespace pdist::passes
