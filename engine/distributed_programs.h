// The global programs of a distributed run: the forward program annotated from the strategy,
// the training program (autodiff + optimizer) and the evaluation program, both completed, with
// a loss every rank can read (a Partial loss gets a final reshard to Replicate).
//
//   PDIST_ASSIGN_OR_RETURN(DistributedPrograms p, BuildDistributedPrograms(forward, strategy, optimizer));
//   PDIST_ASSIGN_OR_RETURN(ir::Program rank1, passes::PartitionProgram(p.train, 1, plans));
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/dist/process_mesh.h"
#include "ir/program.h"
#include "passes/optimizer.h"
#include "passes/pipeline_schedule.h"
#include "passes/pipeline_stages.h"
#include "strategy/strategy.h"

namespace pdist::engine {

// How a pipelined step runs (pp_degree > 1 or several micro-batches): the programs are those of
// one micro-batch, whose ops carry their role and chunk (ir/pipeline_job.h).
struct PipelinePlan {
  int64_t micro_batches = 1;
  std::vector<std::string> split_inputs;  // data inputs cut into micro-batches along dim 0
  passes::ScheduleMode schedule = passes::ScheduleMode::k1F1B;
  int64_t stages = 1;
  int64_t chunks = 1;           // vpp_degree
  int64_t ranks_per_stage = 1;  // dp × mp: rank r is on stage r / ranks_per_stage
  passes::PipelineStages layout;

  bool enabled() const { return micro_batches > 1 || stages > 1; }
  // The jobs of `rank`'s step; `forward_only` keeps the forward jobs (and the optimizer job,
  // which then only gathers the loss), for evaluation.
  absl::StatusOr<std::vector<ir::PipelineJob>> JobsOf(int64_t rank, bool forward_only) const;
};

struct DistributedPrograms {
  ir::Program train;  // global, completed
  ir::Program eval;   // global forward, completed
  std::vector<ir::ProcessMesh> meshes;  // of the train program, for the communicators
  int64_t world_size = 1;
  PipelinePlan pipeline;
};

// With pp_degree > 1 or pipeline.accumulate_steps > 1 the programs are those of one micro-batch
// (passes/micro_batch.h), cut into stages (passes/pipeline_stages.h). Errors name what does
// not fit: a strategy feature this build cannot run yet (sharding, recompute, amp, gradient
// merge), a mesh with more processes than the world, a schedule that cannot run the shape.
absl::StatusOr<DistributedPrograms> BuildDistributedPrograms(const ir::Program& forward,
                                                             const strategy::Strategy& strategy,
                                                             const passes::OptimizerConfig& optimizer);

// The ranks a run needs: the strategy's dp × mp × pp, or more when its annotations or the
// program's own DistAttrs name higher ranks (meshes written by hand, one per pipeline stage).
int64_t WorldSizeOf(const strategy::Strategy& strategy, const ir::Program& program);

// Rejects strategy sections this build cannot execute and pipeline settings that do not fit
// together, naming them.
absl::Status CheckExecutable(const strategy::Strategy& strategy);

}  // namespace pdist::engine
