// PassRegistry: pass factories by name, filled by explicit registration functions.
//
//   const PassRegistry& r = PassRegistry::Global();   // the built-in passes
//   PDIST_ASSIGN_OR_RETURN(auto pass, r.Create({"optimizer", {{"type", "sgd"}}}));
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/status.h"
#include "passes/pass.h"
#include "passes/pass_pipeline_text.h"

namespace pdist::passes {

// Builds a pass from its pipeline options; rejects unknown or malformed options.
using PassFactory = std::function<absl::StatusOr<std::unique_ptr<Pass>>(const PassOptions&)>;

class PassRegistry {
 public:
  // The registry with every built-in pass (RegisterBuiltinPasses), built once, thread-safe.
  // Explicit registration, not static initialisers: a static link never drops a pass.
  static const PassRegistry& Global();

  absl::Status Register(std::string name, std::string summary, PassFactory factory);
  // NotFound naming the pass and listing the known ones; options errors from the factory.
  absl::StatusOr<std::unique_ptr<Pass>> Create(const PassSpec& spec) const;
  std::vector<std::string> Names() const;
  // One line per pass: "  autodiff   append the backward ops of the loss".
  std::string Help() const;

 private:
  struct Entry {
    std::string summary;
    PassFactory factory;
  };
  std::map<std::string, Entry> entries_;
};

// A factory for a pass without options: any option given is an error naming it.
template <typename P>
PassFactory NoOptions(const char* name) {
  return [name](const PassOptions& options) -> absl::StatusOr<std::unique_ptr<Pass>> {
    PDIST_RETURN_IF_ERROR(PassOptionReader(name, options).Finish());
    return std::make_unique<P>();
  };
}

// Registers autodiff, optimizer, annotate-strategy and completion (passes/builtin_passes.cc),
// then the distributed passes.
absl::Status RegisterBuiltinPasses(PassRegistry& registry);
// micro-batch, regather, split-weight-grad, replicate-loss, replicate-outputs, eval-mode, prune-to-outputs,
// recompute, amp, loss-scaling, sharding, partition, fuse-allreduce
// (passes/distributed_passes.cc).
absl::Status RegisterDistributedPasses(PassRegistry& registry);

}  // namespace pdist::passes
