// CheckMessageOrder: one pipelined step's point-to-point messages, run on every rank at once
// without data, under NCCL's rules — so that a step that would hang on GPUs fails on the CPU,
// in a test or before a run (Engine::PrepareDistributed, over nccl and inproc-rendezvous),
// naming the messages.
//
//   NCCL pairs the sends and receives of one channel (a direction between two ranks, and a
//   lane: executor/comm/comm_groups.h) in the order each end issues them, and a receive waits
//   for its send. A rank issues its prologue's messages first, then its jobs' in job order,
//   each job's in program order.
//
//   rank 1: B0.1 sends tag 5, tag 6        rank 0: B0.1 receives tag 6; B0 receives tag 5
//   → "channel 1 > 0: rank 0's receive of tag 6 (micro-batch 0, job B0.1, op #214) would get
//      rank 1's send of tag 5 (micro-batch 0, job B0.1, op #143)"
//
// What it models: each channel a queue of its own, a rank stopping at a receive whose send has
// not been issued (stricter than a GPU's host, which goes on queueing). What it does not: the
// collectives, and whether NCCL's kernels on several communicators of one GPU make progress
// together (NCCL asks for one order of their launches on every rank; the lanes exist exactly
// for messages that are not in one order with the rest) — docs/communicators.md's open question.
// A step that fails here would hang on GPUs; one that passes has no mismatched or circular
// point-to-point waits.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "ir/pipeline_job.h"
#include "ir/program.h"

namespace pdist::engine {

struct RankStep {
  int64_t rank = 0;                    // world rank
  const ir::Program* program = nullptr;  // its local program
  std::vector<ir::PipelineJob> jobs;     // its step, in order (PipelinePlan::JobsOf)
};

// OK when every receive meets its own send and every rank reaches the end of its step;
// otherwise FailedPrecondition naming the first receive that would get another message, or
// every rank left waiting and what for.
absl::Status CheckMessageOrder(const std::vector<RankStep>& ranks);

// The same check over `ranks` and every rank they exchange messages with, transitively (a
// pipeline's column of stages, not the whole world): what a process checks before its first
// step, building only the steps it needs. `step_of(rank)` gives a rank's step; the programs it
// points to must outlive the call.
absl::Status CheckMessageOrderAround(const std::vector<int64_t>& ranks,
                                     const std::function<absl::StatusOr<RankStep>(int64_t rank)>& step_of);

}  // namespace pdist::engine
