// Building the global programs of a distributed run.
#include "engine/distributed_programs.h"

#include "absl/strings/str_cat.h"
#include "ir/builder.h"
#include "ir/status.h"
#include "ir/verifier.h"
#include "passes/annotate.h"
#include "passes/annotate_from_strategy.h"
#include "passes/autodiff.h"
#include "passes/completion.h"
#include "passes/micro_batch.h"
#include "passes/split_weight_grad.h"
#include "passes/partition.h"

namespace pdist::engine {
namespace {

// Appends `loss' = reshard(loss)` to Replicate when the loss is Partial (a data-parallel mean is
// Partial(avg) over dp), or onto every rank when its mesh lacks some (the last pipeline stage's
// loss), so that the value the engine reads is the global loss on every rank.
absl::Status ReplicateLoss(ir::Program& program, int64_t world_size) {
  ir::Value* loss = program.loss();
  if (loss == nullptr || !loss->dist_attr()) return absl::OkStatus();
  const bool everywhere = loss->dist_attr()->mesh.size() == world_size;
  if (everywhere && !loss->dist_attr()->is_partial()) return absl::OkStatus();
  ir::Builder b(&program);
  b.set_op_role(ir::OpRole::kOptimizer);  // once per step, on the loss summed over micro-batches
  PDIST_ASSIGN_OR_RETURN(ir::Value * whole, b.Op1("reshard", {loss}));
  ir::DistAttr target = *loss->dist_attr();
  target.partial.clear();
  if (!everywhere) target = ir::DistAttr::Replicated(ir::ProcessMesh::Range({world_size}, {"world"}), loss->type().rank());
  whole->set_dist_attr(std::move(target));
  program.set_loss(whole);
  return absl::OkStatus();
}

absl::Status Complete(ir::Program& program, const char* what, int64_t world_size) {
  PDIST_RETURN_IF_ERROR(Annotate(passes::CompleteDistAttrs(program).status(), absl::StrCat("completion of the ", what)));
  PDIST_RETURN_IF_ERROR(ReplicateLoss(program, world_size));
  return Annotate(ir::VerifyProgram(program), absl::StrCat("completed ", what));
}



}  // namespace

int64_t WorldSizeOf(const strategy::Strategy& strategy, const ir::Program& program) {
  int64_t world = strategy.WorldSize();
  for (const strategy::TensorAnnotation& a : strategy.annotations) {
    for (int64_t id : a.mesh.process_ids()) world = std::max(world, id + 1);
  }
  for (int64_t id = 0; id < program.num_values(); ++id) {
    const ir::Value* v = program.FindValue(id);
    if (!v->dist_attr()) continue;
    for (int64_t p : v->dist_attr()->mesh.process_ids()) world = std::max(world, p + 1);
  }
  return world;
}

absl::StatusOr<std::vector<ir::PipelineJob>> PipelinePlan::JobsOf(int64_t rank, bool forward_only) const {
  PDIST_ASSIGN_OR_RETURN(std::vector<ir::PipelineJob> jobs,
                         passes::BuildSchedule(schedule, {stages, micro_batches, chunks}, rank / ranks_per_stage));
  if (forward_only) {
    std::erase_if(jobs, [](const ir::PipelineJob& job) {
      return job.kind != ir::JobKind::kForward && job.kind != ir::JobKind::kOptimizer;
    });
  }
  return jobs;
}

absl::Status CheckExecutable(const strategy::Strategy& s) {
  PDIST_ASSIGN_OR_RETURN(passes::ScheduleMode mode, passes::ParseScheduleMode(s.pipeline.schedule_mode));
  PDIST_RETURN_IF_ERROR(Annotate(passes::CheckScheduleShape(mode, {s.pp_degree, s.pipeline.accumulate_steps,
                                                                   s.pipeline.vpp_degree}),
                                 "pipeline (pp_degree, accumulate_steps, vpp_degree)"));
  if (s.sharding.enable) return absl::UnimplementedError("sharding (ZeRO) is not implemented yet");
  if (s.recompute.enable) return absl::UnimplementedError("recompute is not implemented yet");
  if (s.amp.enable) return absl::UnimplementedError("amp is not implemented yet");
  if (s.gradient_merge.enable) return absl::UnimplementedError("gradient_merge is not implemented yet");
  return absl::OkStatus();
}

absl::StatusOr<DistributedPrograms> BuildDistributedPrograms(const ir::Program& forward,
                                                             const strategy::Strategy& strategy,
                                                             const passes::OptimizerConfig& optimizer) {
  PDIST_RETURN_IF_ERROR(CheckExecutable(strategy));
  PipelinePlan pipeline;
  ir::Program annotated;
  if (strategy.pp_degree > 1 || strategy.pipeline.accumulate_steps > 1) {
    PDIST_ASSIGN_OR_RETURN(passes::MicroBatchProgram micro,
                           passes::SplitMicroBatches(forward, strategy.pipeline.accumulate_steps));
    annotated = std::move(micro.program);
    PDIST_ASSIGN_OR_RETURN(pipeline.layout, passes::AnnotatePipelineStages(strategy, annotated));
    pipeline.micro_batches = micro.micro_batches;
    pipeline.split_inputs = std::move(micro.split_inputs);
    PDIST_ASSIGN_OR_RETURN(pipeline.schedule, passes::ParseScheduleMode(strategy.pipeline.schedule_mode));
    pipeline.stages = strategy.pp_degree;
    pipeline.chunks = strategy.pipeline.vpp_degree;
    pipeline.ranks_per_stage = strategy.dp_degree * strategy.mp_degree;
  } else {
    annotated = forward.Clone();
    PDIST_RETURN_IF_ERROR(passes::AnnotateFromStrategy(strategy, annotated));
  }

  DistributedPrograms out{annotated.Clone(), annotated.Clone(), {}, WorldSizeOf(strategy, forward), std::move(pipeline)};
  PDIST_RETURN_IF_ERROR(passes::AppendBackward(out.train, out.train.loss()));
  PDIST_RETURN_IF_ERROR(passes::AppendOptimizer(out.train, optimizer));
  if (out.pipeline.enabled() && out.pipeline.schedule == passes::ScheduleMode::kZBH1) {
    PDIST_RETURN_IF_ERROR(passes::SplitWeightGradients(out.train).status());
  }
  PDIST_RETURN_IF_ERROR(Complete(out.train, "training program", out.world_size));
  PDIST_RETURN_IF_ERROR(Complete(out.eval, "evaluation program", out.world_size));
  out.meshes = passes::MeshesOf(out.train);
  for (const ir::ProcessMesh& mesh : out.meshes) {
    for (int64_t id : mesh.process_ids()) {
      if (id >= out.world_size) {
        return absl::InvalidArgumentError(absl::StrCat("mesh ", mesh.ToString(), " names process ", id,
                                                       " but the strategy has ", out.world_size,
                                                       " ranks (dp_degree × mp_degree × pp_degree)"));
      }
    }
  }
  return out;
}

}  // namespace pdist::engine
