// ShardOptimizer: ZeRO stages 1, 2 and 3 (Rajbhandari et al., 2020) as placements on a completed
// global program. Each rank updates only its slice of every parameter; the communication is what
// the reshards between the layouts lower to (passes/reshard/), so no separate runtime exists.
//
//   stage 1 — optimizer states Shard over dp; the gradient is all-reduced, then sliced:
//     %m1 = state "w.moment1" : f32[32,96] dist {mesh: [2,2] [dp,mp], dims_mapping: [0,1]}
//     %g  = reshard(%gp)  {dims_mapping: [-1,1]}          all-reduce (Partial over dp → whole)
//     %gs = reshard(%g)   {dims_mapping: [0,1]}           slice (no communication)
//     %ws = reshard(%w)   {dims_mapping: [0,1]}           slice
//     %w', %m1', ... = adamw(%ws, %gs, %lr, %m1, ...)     on [16,48] pieces
//     %wr = reshard(%w')  {dims_mapping: [-1,1]}          all-gather;  update %w <- %wr
//   stage 2 — the gradient is reduce-scattered instead: %gs = reshard(%gp) {dims_mapping: [0,1]}
//   stage 3 — the parameter itself is stored as its slice (%w dims_mapping [0,1]); the update
//     writes the slice back without a gather, and every forward and backward job gathers it for
//     its uses in that job ("%w_f = reshard(%w) {dims_mapping: [-1,1]}", role and chunk of the
//     first use), freed after the job's last use. Gathers are issued one parameter ahead: the
//     next parameter's gather goes out before the current one's first use, so the communication
//     stream fetches it while that compute runs.
//
// Which dim: the first tensor dim that no mesh dim shards yet and that divides by the dp size
// (dim 0 when it can: an all-gather along dim 0 needs no transpose). A parameter with no such
// dim keeps whole states (a LayerNorm scale of 30 elements over 4 ranks); the report lists it.
// Under a pipeline the gathers of stage 3 run in every micro-batch's F and B jobs: activations'
// memory, not a copy kept for the step (docs/sharding.md: the trade-off).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/program.h"

namespace pdist::passes {

struct ShardingReport {
  int64_t sharded = 0;  // parameters whose update runs on slices
  // "'gpt.ln_f.scale' f32[30]: no unsharded dim divisible by dp 4" (hybrid: "by dp_shard 4"),
  // one per parameter left whole.
  std::vector<std::string> kept_whole;
  int64_t reshards = 0;  // reshard ops added
  // Gradient reduce-scatters moved into the backward (ShardingOptions::accumulate_shards).
  int64_t reduced_per_micro_batch = 0;
};

struct ShardingOptions {
  int64_t stage = 1;     // 1..3
  std::string axis = "dp";  // the mesh dim name to shard over
  // The ranks of that axis a state is sharded over (0: all of them); below the axis size: hybrid.
  int64_t degree = 0;
  // Stages 2 and 3: each gradient's reduce-scatter runs in the job that makes the gradient — per
  // micro-batch — with that op's role and chunk, so the executor sums shards over the
  // micro-batches instead of whole gradients (executor/job_plan.h sums what the optimizer reads);
  // false: it runs as the optimizer does, once, on the summed whole gradient.
  //   %gs = reshard(%gp) {dims_mapping: [0,1]} @backward         (was @optimizer)
  bool accumulate_shards = false;
};

// A degree below the axis size (ShardingOptions) is hybrid sharding: the updates run on a mesh
// over the same processes with the axis split into `<axis>_replica` × `<axis>_shard` (degree
// ranks, consecutive along the axis), each state Shard along the shards and Replicate along the
// replicas; the gradient is reduce-scattered over the shards and its shard all-reduced over the
// replicas, the updated slice gathered over the shards alone:
//   %g  = reshard(%gp) {mesh: [2,2,1] [dp_replica,dp_shard,mp], dims_mapping: [1,-1]}
// Needs a completed global program with an optimizer (FailedPrecondition otherwise, naming what
// is missing). A parameter whose mesh has no `axis` dim, or a dim of size 1, is left as it is
// (nothing to shard); a degree that does not divide the axis is an error naming both.
absl::StatusOr<ShardingReport> ShardOptimizer(ir::Program& program, const ShardingOptions& options);

// A program that reads the parameters a sharded training program stores (evaluation, prediction)
// must read them as stored: each persistent argument of `program` whose DistAttr differs from
// the same-named one of `reference` takes reference's, and is gathered per job before its uses,
// as stage 3 gathers. Both completed and global; returns how many arguments changed.
//   %w = param "w" : f32[64,32] dist {dims_mapping: [0,-1]}     (stored sliced over dp)
//   %w_f = reshard(%w) {dims_mapping: [-1,-1]}                   (before its first use)
absl::StatusOr<int64_t> StoreLike(ir::Program& program, const ir::Program& reference);

}  // namespace pdist::passes
