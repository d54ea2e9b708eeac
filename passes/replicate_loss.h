// ReplicateLoss: the loss of a distributed program made readable on every rank; ReplicateOutputs:
// its outputs (ir::ProgramOutput), for prediction.
//
//   loss %9  (Partial(avg) over dp)      →   %10 = reshard(%9) : f32[] dist! {..., dims_mapping: []}
//                                            loss %10   (Replicate, role optimizer)
//
// A data-parallel mean is Partial(avg) over dp; the last pipeline stage's loss lives on that
// stage's mesh only. The appended reshard (role optimizer: once per step, on the loss summed
// over the micro-batches) gives every rank of the world the global loss, so that whichever
// rank reports it reports the same number.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "ir/program.h"

namespace pdist::passes {

// Returns whether it appended a reshard (false: the loss is already whole on all `world_size`
// ranks, or the program is not distributed).
absl::StatusOr<bool> ReplicateLoss(ir::Program& program, int64_t world_size);

// Every output whole on every rank (an all-gather of the logits' shards, a sum of a Partial, a
// send from the last pipeline stage), the same way; returns how many reshards it appended.
absl::StatusOr<int64_t> ReplicateOutputs(ir::Program& program, int64_t world_size);

}  // namespace pdist::passes
