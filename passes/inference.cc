// SetEvalMode and PruneToOutputs: evaluation's and prediction's forms of a forward program.
#include "passes/inference.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"

namespace pdist::passes {

int64_t SetEvalMode(ir::Program& program) {
  int64_t switched = 0;
  for (const auto& op : program.block().ops()) {
    auto it = op->mutable_attrs().find("is_test");
    if (it == op->mutable_attrs().end() || it->second == ir::Attribute(true)) continue;
    it->second = ir::Attribute(true);
    ++switched;
  }
  return switched;
}

absl::StatusOr<int64_t> PruneToOutputs(ir::Program& program) {
  if (program.outputs().empty()) {
    return absl::FailedPreconditionError(
        "the program has no outputs to predict; mark them (`output \"logits\" %v` in the textual IR; "
        "pdist-export's models and pdist-import mark theirs)");
  }
  if (!program.gradients().empty() || !program.updates().empty()) {
    return absl::FailedPreconditionError("prune-to-outputs: give the forward program, before autodiff");
  }
  absl::flat_hash_set<const ir::Value*> needed;
  absl::flat_hash_set<const ir::Operation*> kept;
  for (const ir::ProgramOutput& o : program.outputs()) needed.insert(o.value);
  const auto& ops = program.block().ops();
  for (size_t i = ops.size(); i-- > 0;) {
    const auto& results = ops[i]->results();
    if (std::none_of(results.begin(), results.end(), [&](const ir::Value* r) { return needed.contains(r); })) continue;
    kept.insert(ops[i].get());
    for (const ir::Value* v : ops[i]->operands()) {
      if (v != nullptr) needed.insert(v);
    }
  }
  const auto removed = static_cast<int64_t>(ops.size() - kept.size());
  // Parameters stay (the workspace holds them all); the loss binding goes even when an output
  // reads the loss's value.
  program = program.CloneIf([&](const ir::Operation& op) { return kept.contains(&op); },
                            [&](const ir::Value& arg) { return arg.role() != ir::ValueRole::kDataInput || needed.contains(&arg); });
  program.set_loss(nullptr);
  return removed;
}

}  // namespace pdist::passes
