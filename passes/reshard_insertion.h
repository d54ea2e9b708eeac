// InsertReshards: the last step of completion. One forward pass over the ops, each op's forward
// rule run on the final DistAttrs of its operands, makes the program agree with its rules:
//
//  - every result takes the output its producer's rule gives (propagation only chose the
//    arguments' DistAttrs and steered the rules; what an op produces is the rule's word);
//  - an operand the rule needs with another DistAttr (or on another mesh) is replaced by a
//    `reshard` of it, placed before its first consumer and shared by every consumer that needs
//    the same target;
//  - an annotated result that its producer cannot give becomes the result of a reshard from a
//    fresh value that the producer writes instead (shard_tensor on an intermediate is a reshard);
//  - a reshard written without a target (no DistAttr on its result, e.g. the gradient of a
//    reshard when autodiff ran before completion) takes the DistAttr its first use needs;
//  - an `update s <- v` whose v differs from s gets a reshard of v at the end of the program.
//
//   %4 = matmul(%2, %3) : f32[8,64] dist {mesh: [2] [mp], dims_mapping: [-1,-1], partial: {0: sum}}
//   %5 = reshard(%4) : f32[8,64] dist {mesh: [2] [mp], dims_mapping: [-1,-1]}   ← inserted
//   %6 = add(%5, %1) : f32[8,64] dist {mesh: [2] [mp], dims_mapping: [-1,-1]}
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "ir/program.h"
#include "passes/dist_state.h"

namespace pdist::passes {

// Needs a DistAttr for every value (run FillUnreached first). Returns the number of reshard ops
// inserted; the state holds the DistAttrs of the new values too. Errors name the op whose rule
// failed.
absl::StatusOr<int64_t> InsertReshards(ir::Program& program, DistState& state);

}  // namespace pdist::passes
