// Multi-tensor optimizer updates: a program's sgd, momentum and adamw ops that share their kind,
// hyper-parameters, learning rate and skip_update operands, dtypes and pipeline job become one
// merged_sgd / merged_momentum / merged_adamw (Paddle's merged_momentum and merged_adam;
// ir/ops/merged_updates.h), so that a GPU updates a rank's parameters in a launch per 24 of them
// instead of one per parameter (apex's and PyTorch's multi-tensor optimizers).
//
//   %a0.. = adamw(%w0, %g0, %lr, %m0, %v0, %b0, %c0)        %a0.., %a1.. = merged_adamw(%lr, none,
//   %a1.. = adamw(%w1, %g1, %lr, %m1, %v1, %b1, %c1)    →      %w0, %g0, %m0, %v0, %b0, %c0,
//                                                              %w1, %g1, %m1, %v1, %b1, %c1)
//
// Under mixed precision an update's new f32 master weight is read only by its cast to the bf16/f16
// parameter (passes/optimizer.h); the merged op takes those casts in (`multi_precision`), each
// parameter's rounded copy one more result, so the master is not read back from memory by a
// launch of its own (Paddle's multi_precision merged_adam):
//
//   %a0.. = adamw(%w0.master, %g0_bf16, ...)           %a0.., %w0', %a1.., %w1' = merged_adamw(...)
//   %w0' = cast(%a0) {dtype = bf16}                →                               {multi_precision = true}
//
// Updates of one kind are cut into groups in program order (kMergedUpdates, kMergedUpdateBytes
// below). A merged op takes the place of its last member and its members' results. The ops between its
// first and last member that read a member's result (a master weight's cast to bf16, ZeRO's
// all-gather of an updated shard), directly or through each other, move right after it in their
// order; every other op keeps its place. Every rank moves the same ops, so collectives keep one
// order across a group. Each parameter's results are bit for bit its own op's (the kernels run
// the same update per parameter). Run it on a rank's program (after partition) or on a single rank's,
// after the optimizer pass.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "ir/program.h"

namespace pdist::passes {

// A merged op's new values are installed (and the old ones freed) once it has run, so its
// members' results are alive together: a merged op takes at most kMergedUpdates updates (a CUDA
// launch's worth) whose results hold at most kMergedUpdateBytes — a transient of that size beside
// the largest single update, where one op per parameter had one update's. Without the bound one
// merged op for a whole 1.3B model would hold a second copy of its f32 masters and moments.
inline constexpr size_t kMergedUpdates = 24;
inline constexpr int64_t kMergedUpdateBytes = int64_t{64} << 20;

struct FuseOptimizerReport {
  int64_t merged_ops = 0;  // merged ops made
  int64_t updates = 0;     // sgd / momentum / adamw ops they replaced
  int64_t roundings = 0;   // master-weight casts they took in (multi_precision)
};

FuseOptimizerReport FuseOptimizerUpdates(ir::Program& program);

}  // namespace pdist::passes
