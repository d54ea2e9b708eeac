// JobPlan: how a pipelined step runs a rank's local program — which ops each job runs, when a
// micro-batch's tensors are freed, and which values are summed over micro-batches.
//
//   F (chunk c):  ops of role forward, chunk c
//   B (chunk c):  ops of role backward and backward_weight, chunk c   (B and W when split)
//   O:            ops of role optimizer, once, on the sums
//   prologue:     ops of role prologue, once, before every job (a tied table's send); what
//                 they make is read by every micro-batch as an argument is
//
// A micro-batch's jobs run its sections in the order F(0) … F(v-1), B(v-1) … B(0) (B before W
// of a chunk when split), whatever the schedule interleaves between micro-batches, so a tensor
// is freed after its last use in that order. A value that a forward or backward op makes and an
// optimizer op reads (a gradient, the loss) is accumulated: summed over the micro-batches. So
// is a fetched value made per micro-batch (its sum is what RunResult::fetched returns).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/pipeline_job.h"
#include "ir/program.h"

namespace pdist::exec {

struct JobPlan {
  int64_t chunks = 1;
  // Ops of each (job kind, chunk), in program order; the optimizer's under chunk 0.
  std::map<std::pair<ir::JobKind, int64_t>, std::vector<size_t>> ops;
  // Ops of role prologue, in program order: run once, before the step's first job.
  std::vector<size_t> prologue;
  // What they make that other ops read: put in every micro-batch's table (and the optimizer's)
  // as the arguments are, and freed from none of them; it lives until the step ends.
  std::set<int64_t> step_values;
  // release_after[i]: ids freed from a micro-batch's tensors after op i (for O ops: from the
  // optimizer's); one plan for whole backward jobs, one for split (B, W) ones.
  std::vector<std::vector<int64_t>> release_whole;
  std::vector<std::vector<int64_t>> release_split;
  // Values summed over micro-batches, by id.
  std::set<int64_t> accumulated;
  // Those among them that nothing in their micro-batch reads: the release plans leave them out
  // and the step frees each from its micro-batch's table once it has joined the sum — at once
  // for what the compute stream makes, when the job ends for what the communication stream
  // still owes (a reduce-scatter of sharding.accumulate_shards), instead of waiting for it there.
  std::set<int64_t> freed_once_summed;
  // Why the program cannot run as pipeline jobs (a value to sum that is not floating-point),
  // reported by a pipelined run; a whole-program run does not care.
  absl::Status unsummable;

  const std::vector<size_t>& OpsOf(const ir::PipelineJob& job) const;
};

// `keep`: values to keep to the end of the step (fetches).
JobPlan PlanJobs(const ir::Program& program, const std::vector<int64_t>& keep);

}  // namespace pdist::exec
