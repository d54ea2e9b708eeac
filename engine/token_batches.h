// Binds a token dataset to a language model: the batch and sequence length come from the model's
// "tokens" input, the vocabulary from the embedding table that reads it.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "engine/dataset.h"
#include "engine/engine.h"
#include "ir/program.h"

namespace pdist::engine {

// Fills batch, seq_len and vocab of `options` from `model` (which must have data inputs
// "tokens" and "labels" of shape [batch, seq]). Error names what is missing.
absl::StatusOr<TokenDatasetOptions> DatasetOptionsForModel(const ir::Program& model, TokenDatasetOptions options);

// A BatchSource over `dataset` feeding "tokens" and "labels".
Engine::BatchSource BatchesFrom(TokenDataset& dataset);

}  // namespace pdist::engine
