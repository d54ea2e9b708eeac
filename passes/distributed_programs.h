// The programs of a distributed run, built by named pass pipelines that anyone can replay:
// the forward program annotated from the strategy, the training program (autodiff + optimizer)
// and the evaluation program, both completed, with a loss every rank can read; the prediction
// program (BuildPredictProgram, made when first asked for); then, per rank, its local program.
//
//   PDIST_ASSIGN_OR_RETURN(DistributedPrograms p, BuildDistributedPrograms(forward, strategy, optimizer));
//   p.pipelines.Train() // "micro-batch{n=4},annotate-strategy,autodiff,optimizer{type=adamw},
//                       //  completion,split-weight-grad,replicate-loss{world=4}"
//   PDIST_ASSIGN_OR_RETURN(ir::Program rank1,
//                          LocalProgram(p.train, RankPipeline(1, /*bucket_bytes=*/0), plans));
//
// `pdist-opt model.pb --strategy s.json --passes="<p.pipelines.Train()>,partition{rank=1}"` prints
// the same rank-1 program the engine runs (pdist-export --rank does it in one go).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/dist/process_mesh.h"
#include "ir/program.h"
#include "passes/optimizer.h"
#include "passes/pass_manager.h"
#include "passes/pass_pipeline_text.h"
#include "passes/pipeline_schedule.h"
#include "passes/reshard_plan.h"
#include "strategy/strategy.h"

namespace pdist::passes {

// How a pipelined step runs (pp_degree > 1 or several micro-batches): the programs are those of
// one micro-batch, whose ops carry their role and chunk (ir/pipeline_job.h).
struct PipelinePlan {
  int64_t micro_batches = 1;
  std::vector<std::string> split_inputs;  // data inputs cut into micro-batches along dim 0
  ScheduleMode schedule = ScheduleMode::k1F1B;
  int64_t stages = 1;
  int64_t chunks = 1;           // vpp_degree
  int64_t ranks_per_stage = 1;  // dp × mp: rank r is on stage r / ranks_per_stage

  bool enabled() const { return micro_batches > 1 || stages > 1; }
  // The jobs of `rank`'s step; `forward_only` keeps the forward jobs (and the optimizer job,
  // which then only gathers the loss), for evaluation.
  absl::StatusOr<std::vector<ir::PipelineJob>> JobsOf(int64_t rank, bool forward_only) const;
  // The prediction program's jobs (whole batches, one "micro-batch"): F0 of each of the rank's
  // chunks in order, then O (which makes the outputs whole on every rank); none without stages.
  std::vector<ir::PipelineJob> PredictJobs() const;
};

// The pass pipelines that make a run's global programs from the forward program: `annotate`,
// then `train_tail` for the training program or `eval_tail` for the evaluation program (the
// annotated program is made once and copied). `predict` is whole: it annotates without
// micro-batches (prediction runs whole batches, forward only) and ends with every output whole on
// every rank:
//   "annotate-strategy,eval-mode,prune-to-outputs,completion,replicate-outputs{world=4}"
struct DistributedPipelines {
  std::vector<PassSpec> annotate, train_tail, eval_tail, predict;
  // Evaluation's annotation: `annotate` but for micro-batch's avg, which gradient_merge.avg
  // false turns off for training (the step sums the micro-batches' gradients) and evaluation
  // keeps (its loss is the batch's mean whatever the step does with gradients).
  std::vector<PassSpec> eval_annotate;
  // Whole pipelines as pdist-opt text (passes/pass_pipeline_text.h).
  std::string Train() const;
  std::string Eval() const;
};

struct DistributedPrograms {
  ir::Program train;  // global, completed
  ir::Program eval;   // global forward, completed
  std::vector<ir::ProcessMesh> meshes;  // of the train program, for the communicators
  int64_t world_size = 1;
  PipelinePlan pipeline;
  DistributedPipelines pipelines;  // what made train and eval
};

// The pipelines for `strategy` on `world_size` ranks. With pp_degree > 1 or several
// micro-batches (pipeline.accumulate_steps, gradient_merge.k_steps) the programs are those of one
// micro-batch (micro-batch), cut into stages (annotate-strategy); ZBH1 adds split-weight-grad
// after completion, recompute.enable adds recompute{granularity} after autodiff,
// sharding.enable adds sharding{stage} (degree, accumulate_shards where set) after completion.
absl::StatusOr<DistributedPipelines> DistributedPipelinesFor(const strategy::Strategy& strategy,
                                                            const OptimizerConfig& optimizer, int64_t world_size);

// Runs DistributedPipelinesFor's pipelines through PassManager (verifying after every pass).
// Errors name what does not fit: a strategy feature this build cannot run yet (amp, sharding
// over part of dp), a mesh with more processes than the world, a schedule that
// cannot run the shape, and the pass that failed.
absl::StatusOr<DistributedPrograms> BuildDistributedPrograms(const ir::Program& forward,
                                                             const strategy::Strategy& strategy,
                                                             const OptimizerConfig& optimizer,
                                                             const PassManagerOptions& pass_options = {});

// The global prediction program of `forward` under `strategy` (DistributedPipelines::predict),
// its parameters stored as the global training program `train` stores them (StoreLike: ZeRO-3
// slices are gathered before use). FailedPrecondition when `forward` has no outputs.
absl::StatusOr<ir::Program> BuildPredictProgram(const ir::Program& forward, const strategy::Strategy& strategy,
                                                const ir::Program& train, int64_t world_size);

// The fusions that make a rank's program run as fewer, larger GPU kernels; none changes a
// number on the CPU (each fused kernel there runs the kernels of what it fuses).
struct KernelFusions {
  bool optimizer = false;      // "fuse-optimizer": multi-tensor updates (passes/fuse_optimizer.h)
  bool gemm_epilogue = false;  // "fuse-gemm-epilogue": bias adds in GEMM epilogues (passes/fuse_gemm_epilogue.h)
};

// What makes rank `rank`'s local program from a global one: "partition{rank=1}", and for a
// training program ("fuse-allreduce{bucket_bytes=N}", bucket_bytes set) the gradient buckets;
// with the fusions asked for ("fuse-gemm-epilogue" before the buckets, "fuse-optimizer" last).
std::string RankPipeline(int64_t rank, std::optional<int64_t> bucket_bytes, const KernelFusions& fusions = {});

// Runs `pipeline` (RankPipeline's) on a copy of `global`; `plans` is shared between ranks.
absl::StatusOr<ir::Program> LocalProgram(const ir::Program& global, const std::string& pipeline,
                                         ReshardPlanCache& plans);

// A single-rank training program's pipeline: "autodiff,optimizer{type=adamw}", then the fusions
// asked for.
std::string SingleRankPipeline(const OptimizerConfig& optimizer, const KernelFusions& fusions = {});

// Runs `pipeline` on `program` through a PassManager; errors say `what` was being made.
absl::Status RunPipeline(const std::string& pipeline, ir::Program& program, PassContext& context,
                         const std::string& what, const PassManagerOptions& pass_options = {});

// The ranks a run needs: the strategy's dp × mp × pp, or more when its annotations or the
// program's own DistAttrs name higher ranks (meshes written by hand, one per pipeline stage).
int64_t WorldSizeOf(const strategy::Strategy& strategy, const ir::Program& program);

// Rejects strategy sections this build cannot execute and pipeline settings that do not fit
// together, naming them.
absl::Status CheckExecutable(const strategy::Strategy& strategy);

}  // namespace pdist::passes
