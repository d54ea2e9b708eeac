// Completion: from a few annotated values, a DistAttr for every value of a program, and a
// `reshard` op wherever an op needs an operand distributed otherwise than its producer gives it.
//
//   %0 = data "x" : f32[8,16] dist! {mesh: [2] [mp], dims_mapping: [-1,-1]}
//   %1 = param "w1" : f32[16,32] dist! {mesh: [2] [mp], dims_mapping: [-1,0]}
//   %2 = param "w2" : f32[32,16] dist! {mesh: [2] [mp], dims_mapping: [0,-1]}
//   %3 = matmul(%0, %1) : f32[8,32]           →  dims_mapping [-1,0]           (column-parallel)
//   %4 = matmul(%3, %2) : f32[8,16]           →  [-1,-1], partial {0: sum}     (row-parallel)
//   %5 = relu(%4) : f32[8,16]                 →  a reshard %4 → [-1,-1] is inserted before relu
//
// Three steps (docs/completion.md): propagation to a fixed point (passes/dist_propagation.h),
// Replicate on the first mesh for values no annotation reaches, then a forward pass that makes
// every result what its producer's rule gives and inserts the reshards
// (passes/reshard_insertion.h). Every op needs an SPMD rule; a missing one is Unimplemented,
// naming the op — never a silent Replicate.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/program.h"

namespace pdist::passes {

struct CompletionOptions {
  // Propagation stops with an error after this many rounds (a round: a forward and a reverse
  // sweep). Real programs settle in 2–4.
  int max_rounds = 32;
  // Fill CompletionReport::explanations (one line per value; costs a little time on big programs).
  bool explain = false;
};

struct CompletionReport {
  bool changed = false;    // a DistAttr was set or changed, or a reshard inserted
  int rounds = 0;          // propagation rounds; 0 when no value was annotated (nothing done)
  int64_t reshards = 0;    // reshard ops inserted
  // Why each value has its DistAttr, in canonical value order:
  //   "%4 {mesh: [2] [mp], dims_mapping: [-1,-1], partial: {0: sum}} ← forward: %4 = matmul(%3, %2)"
  std::vector<std::string> explanations;
};

// A program without any DistAttr is left as it is (rounds = 0). Annotated values never change.
absl::StatusOr<CompletionReport> CompleteDistAttrs(ir::Program& program, const CompletionOptions& options = {});

}  // namespace pdist::passes
