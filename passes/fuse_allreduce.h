// Gradient all-reduce scheduling for a partitioned program. First every c_allreduce (and every
// gradient c_reduce_scatter, which ZeRO 2 and 3 use instead) moves up to
// right after the op that produces its operand (completion leaves a gradient's all-reduce just
// before the optimizer, after the whole backward pass: nothing could overlap it). Then they are
// fused into c_allreduce_coalesced ops of up to `bucket_bytes` each (PyTorch DDP's and Megatron-LM's gradient buckets), so that a
// data-parallel backward pays one collective latency per bucket instead of one per parameter;
// the dim-0 gradient reduce-scatters likewise into c_reduce_scatter_coalesced ops. An all-reduce
// of what a gradient reduce-scatter made (hybrid ZeRO's all-reduce of a shard over its replicas,
// or mp's after dp's reduce-scatter) waits for a second round: hoisted after the reduce-scatter's
// bucket and bucketed with its kind, so that it neither splits the reduce-scatter buckets nor
// is fused before it can move.
//
//   %g1 = c_allreduce(%a) {ranks = [0, 2]}        %g1, %g2 = c_allreduce_coalesced(%a, %b)
//   ...                                      →       {ranks = [0, 2]}   (at %g2's place)
//   %g2 = c_allreduce(%b) {ranks = [0, 2]}
//
// Members share kind, group, reduction and dtype. A bucket is emitted where its last member was, so it
// closes early when a member's result is needed before that point (an activation all-reduce in
// the forward pass stays alone). Buckets fill in program order, i.e. in the order the backward
// pass produces gradients, and each is sent as soon as it is full — with the executor's
// communication stream, while the rest of the backward pass runs.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "ir/program.h"

namespace pdist::passes {

// PyTorch DDP's default bucket size: the engine's and the `fuse-allreduce` pass's.
inline constexpr int64_t kDefaultGradientBucketBytes = int64_t{25} << 20;

// Returns the number of buckets made (of two or more all-reduces). bucket_bytes <= 0: hoisting
// only, no buckets.
absl::StatusOr<int64_t> ScheduleGradientAllReduces(ir::Program& local, int64_t bucket_bytes);

}  // namespace pdist::passes
