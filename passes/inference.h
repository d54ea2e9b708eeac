// The programs that read a trained model without training it: evaluation and prediction.
//
// SetEvalMode: every op with an `is_test` attribute (dropout, attention's dropout) runs as at
// inference — dropout passes its input through — as Paddle's `model.eval()` does.
//
// PruneToOutputs: the forward program cut down to what its outputs need; the loss, the ops only
// it reads and the data inputs nothing kept reads (the labels) go:
//   %0 = data "tokens" : i64[8,32]               %0 = data "tokens" : i64[8,32]
//   %1 = data "labels" : i64[8,32]               %2 = param "w" : f32[64,32]
//   %2 = param "w" : f32[64,32]          →       %3 = embedding(%0, %2) ...
//   ... %9 = mean(%8)                             ...
//   loss %9                                       output "logits" %7
//   output "logits" %7
// Parameters stay (the workspace holds them all), read or not.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "ir/program.h"

namespace pdist::passes {

// Returns how many ops it switched.
int64_t SetEvalMode(ir::Program& program);

// Returns how many ops it removed. FailedPrecondition when the program has no outputs or is
// not a forward program (gradients or updates).
absl::StatusOr<int64_t> PruneToOutputs(ir::Program& program);

}  // namespace pdist::passes
