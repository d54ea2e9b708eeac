// Propagation of DistAttrs through a program's SPMD rules, to a fixed point (Paddle's
// Completer._update_dims_mapping): a forward sweep in op order proposes each op's outputs to
// its results, a reverse sweep in reverse order proposes each op's reverse-rule inputs to its
// operands (and an `update` value's DistAttr to its state); repeat until a round changes nothing.
//
//   %0 = data "x" : f32[8,16] dist! {mesh: [2] [dp], dims_mapping: [0,-1]}
//   %1 = param "w" : f32[16,4]                    ← reverse from matmul: [-1,-1]
//   %2 = matmul(%0, %1) : f32[8,4]                ← forward from matmul: [0,-1]
#pragma once

#include "absl/status/statusor.h"
#include "ir/program.h"
#include "passes/dist_state.h"

namespace pdist::passes {

// Returns the number of rounds (a round = a forward and a reverse sweep) it took. An op whose
// rule is missing or fails stops it with the rule's error naming the op; a program that has not
// settled after `max_rounds` rounds is an Internal error (the merge policy is monotone, so this
// means a rule that contradicts itself).
absl::StatusOr<int> PropagateDistAttrs(const ir::Program& program, DistState& state, int max_rounds);

// Gives every value still without a DistAttr Replicate on the first mesh in use (that of the
// first value, in canonical order, that has one). Returns false, changing nothing, when no value
// has a DistAttr at all.
bool FillUnreached(const ir::Program& program, DistState& state);

}  // namespace pdist::passes
