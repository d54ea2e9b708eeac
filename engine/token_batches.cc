// DatasetOptionsForModel and BatchesFrom.
#include "engine/token_batches.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/status.h"

namespace pdist::engine {

absl::StatusOr<TokenDatasetOptions> DatasetOptionsForModel(const ir::Program& model, TokenDatasetOptions options) {
  const ir::Value* tokens = model.FindArgument("tokens");
  const ir::Value* labels = model.FindArgument("labels");
  if (tokens == nullptr || labels == nullptr) {
    // Name what is missing: an imported model without --loss has its tokens but no labels.
    std::vector<std::string> missing;
    if (tokens == nullptr) missing.push_back("'tokens'");
    if (labels == nullptr) missing.push_back("'labels'");
    return absl::InvalidArgumentError(absl::StrCat(
        "the model has no data input ", absl::StrJoin(missing, " or "), "; token datasets need a language model",
        model.loss() == nullptr ? " with a loss (it has none: pdist-import --loss cross_entropy adds one)" : ""));
  }
  if (tokens->type().rank() != 2) {
    return absl::InvalidArgumentError(absl::StrCat("model input 'tokens' must be [batch, seq], got ",
                                                   tokens->type().ToString()));
  }
  options.batch = tokens->type().shape[0];
  options.seq_len = tokens->type().shape[1];
  for (const auto& op : model.block().ops()) {
    if (op->type() == "embedding" && op->operand(0) == tokens) {
      options.vocab = op->operand(1)->type().shape.at(0);
      return options;
    }
  }
  return absl::InvalidArgumentError("no embedding op reads the model input 'tokens'; cannot tell the vocabulary size");
}

Engine::BatchSource BatchesFrom(TokenDataset& dataset) {
  return [&dataset]() -> absl::StatusOr<exec::Feeds> {
    PDIST_ASSIGN_OR_RETURN(Batch batch, dataset.Next());
    return exec::Feeds{{"tokens", std::move(batch.tokens)}, {"labels", std::move(batch.labels)}};
  };
}

}  // namespace pdist::engine
