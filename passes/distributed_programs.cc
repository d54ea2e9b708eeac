// The pass pipelines of a distributed run and the programs they make.
#include "passes/distributed_programs.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "ir/dist/shard_tensor.h"
#include "ir/status.h"
#include "passes/partition.h"
#include "passes/pass_pipeline_text.h"
#include "passes/schedules/schedule_def.h"
#include "passes/sharding.h"

namespace pdist::passes {

int64_t WorldSizeOf(const strategy::Strategy& strategy, const ir::Program& program) {
  int64_t world = strategy.WorldSize();
  for (const strategy::TensorAnnotation& a : strategy.annotations) {
    for (int64_t id : a.mesh.process_ids()) world = std::max(world, id + 1);
  }
  return std::max(world, ir::RanksNamedBy(program));
}

absl::StatusOr<std::vector<ir::PipelineJob>> PipelinePlan::JobsOf(int64_t rank, bool forward_only) const {
  PDIST_ASSIGN_OR_RETURN(std::vector<ir::PipelineJob> jobs,
                         BuildSchedule(schedule, {stages, micro_batches, chunks}, rank / ranks_per_stage));
  if (forward_only) {
    std::erase_if(jobs, [](const ir::PipelineJob& job) {
      return job.kind != ir::JobKind::kForward && job.kind != ir::JobKind::kOptimizer;
    });
  }
  return jobs;
}

std::vector<ir::PipelineJob> PipelinePlan::PredictJobs() const {
  if (stages <= 1) return {};
  std::vector<ir::PipelineJob> jobs;
  for (int64_t c = 0; c < chunks; ++c) jobs.push_back({.kind = ir::JobKind::kForward, .micro_batch = 0, .chunk = c});
  jobs.push_back({.kind = ir::JobKind::kOptimizer});
  return jobs;
}

absl::Status CheckExecutable(const strategy::Strategy& s) {
  PDIST_ASSIGN_OR_RETURN(ScheduleMode mode, ParseScheduleMode(s.pipeline.schedule_mode));
  PDIST_RETURN_IF_ERROR(WithContext(CheckScheduleShape(mode, {s.pp_degree, s.MicroBatches(),
                                                           s.pipeline.vpp_degree}),
                                 s.gradient_merge.enable ? "gradient_merge.k_steps" : "pipeline (pp_degree, accumulate_steps, vpp_degree)"));
  return absl::OkStatus();
}

namespace {

bool Pipelined(const strategy::Strategy& s) { return s.MicroBatched(); }

}  // namespace

std::string DistributedPipelines::Train() const {
  std::vector<PassSpec> all = annotate;
  all.insert(all.end(), train_tail.begin(), train_tail.end());
  return PrintPipeline(all);
}

std::string DistributedPipelines::Eval() const {
  std::vector<PassSpec> all = eval_annotate;
  all.insert(all.end(), eval_tail.begin(), eval_tail.end());
  return PrintPipeline(all);
}

absl::StatusOr<DistributedPipelines> DistributedPipelinesFor(const strategy::Strategy& strategy,
                                                            const OptimizerConfig& optimizer, int64_t world_size) {
  PDIST_ASSIGN_OR_RETURN(ScheduleMode schedule, ParseScheduleMode(strategy.pipeline.schedule_mode));
  DistributedPipelines p;
  std::vector<PassSpec> annotate = {{"annotate-strategy", {}}};
  if (strategy.amp.enable) annotate.push_back({"amp", {{"dtype", strategy.amp.dtype}, {"level", strategy.amp.level}}});
  if (Pipelined(strategy)) {
    PassSpec micro{"micro-batch", {{"n", absl::StrCat(strategy.MicroBatches())}}};
    if (strategy.gradient_merge.enable && !strategy.gradient_merge.avg) micro.options["avg"] = "false";
    p.annotate.push_back(std::move(micro));
  }
  p.annotate.insert(p.annotate.end(), annotate.begin(), annotate.end());
  p.eval_annotate = p.annotate;
  for (PassSpec& pass : p.eval_annotate) {
    if (pass.options.count("avg")) pass.options["avg"] = "true";  // (without it, the strategy's)
  }
  p.predict = annotate;  // whole batches
  p.predict.insert(p.predict.end(), {{"eval-mode", {}}, {"prune-to-outputs", {}}, {"completion", {}},
                                     {"replicate-outputs", {{"world", absl::StrCat(world_size)}}}});
  const PassSpec replicate_loss{"replicate-loss", {{"world", absl::StrCat(world_size)}}};
  p.train_tail.push_back({"autodiff", {}});
  if (strategy.recompute.enable) {
    p.train_tail.push_back(
        {"recompute", {{"granularity", strategy.recompute.granularity}, {"segments", strategy.recompute.segments}}});
  }
  p.train_tail.push_back({"optimizer", OptimizerPassOptions(optimizer)});
  if (strategy.amp.ScalesLoss()) p.train_tail.push_back({"loss-scaling", {}});
  p.train_tail.push_back({"completion", {}});
  if (Pipelined(strategy)) p.train_tail.push_back({"stage-gradient-sums", {}});
  if (strategy.sp) p.train_tail.push_back({"regather", {}});
  if (Pipelined(strategy) && ScheduleDefOf(schedule).splits_backward) p.train_tail.push_back({"split-weight-grad", {}});
  if (strategy.sharding.enable && strategy.dp_degree > 1) {
    PassSpec sharding{"sharding", {{"stage", absl::StrCat(strategy.sharding.stage)}}};
    if (strategy.sharding.degree > 0 && strategy.sharding.degree < strategy.dp_degree) {
      sharding.options["degree"] = absl::StrCat(strategy.sharding.degree);  // hybrid: shards × replicas
    }
    if (strategy.sharding.accumulate_shards) sharding.options["accumulate_shards"] = "true";
    p.train_tail.push_back(std::move(sharding));
  }
  p.train_tail.push_back(replicate_loss);
  p.eval_tail = {{"eval-mode", {}}, {"completion", {}}, replicate_loss};
  return p;
}

absl::StatusOr<ir::Program> BuildPredictProgram(const ir::Program& forward, const strategy::Strategy& strategy,
                                                const ir::Program& train, int64_t world_size) {
  PDIST_ASSIGN_OR_RETURN(DistributedPipelines pipelines, DistributedPipelinesFor(strategy, {}, world_size));
  PassContext context;
  context.strategy = strategy;
  ir::Program predict = forward.Clone();
  PDIST_RETURN_IF_ERROR(RunPipeline(PrintPipeline(pipelines.predict), predict, context, "prediction program"));
  PDIST_RETURN_IF_ERROR(WithContext(StoreLike(predict, train).status(), "prediction program"));
  return predict;
}

// The GEMM epilogues fuse before fuse-allreduce moves each gradient's collective to right after
// its producer: a bias gradient's all-reduce between its add_grad and the matmul_grad would keep
// the pair apart; after, it follows the fused op.
std::string RankPipeline(int64_t rank, std::optional<int64_t> bucket_bytes, const KernelFusions& fusions) {
  std::vector<PassSpec> specs = {{"partition", {{"rank", absl::StrCat(rank)}}}};
  if (fusions.gemm_epilogue) specs.push_back({"fuse-gemm-epilogue", {}});
  if (bucket_bytes) specs.push_back({"fuse-allreduce", {{"bucket_bytes", absl::StrCat(*bucket_bytes)}}});
  if (fusions.optimizer) specs.push_back({"fuse-optimizer", {}});
  return PrintPipeline(specs);
}

std::string SingleRankPipeline(const OptimizerConfig& optimizer, const KernelFusions& fusions) {
  std::vector<PassSpec> specs = {{"autodiff", {}}, {"optimizer", OptimizerPassOptions(optimizer)}};
  if (fusions.gemm_epilogue) specs.push_back({"fuse-gemm-epilogue", {}});
  if (fusions.optimizer) specs.push_back({"fuse-optimizer", {}});
  return PrintPipeline(specs);
}

absl::Status RunPipeline(const std::string& pipeline, ir::Program& program, PassContext& context,
                         const std::string& what, const PassManagerOptions& pass_options) {
  PassManager pm(pass_options);
  PDIST_RETURN_IF_ERROR(WithContext(pm.AddPipeline(pipeline), absl::StrCat("the pipeline of the ", what)));
  return WithContext(pm.Run(program, context).status(), what);
}

absl::StatusOr<ir::Program> LocalProgram(const ir::Program& global, const std::string& pipeline,
                                         ReshardPlanCache& plans) {
  ir::Program local = global.Clone();
  PassContext context;
  context.reshard_plans = &plans;
  PDIST_RETURN_IF_ERROR(RunPipeline(pipeline, local, context, "local program"));
  return local;
}

absl::StatusOr<DistributedPrograms> BuildDistributedPrograms(const ir::Program& forward,
                                                             const strategy::Strategy& strategy,
                                                             const OptimizerConfig& optimizer,
                                                             const PassManagerOptions& pass_options) {
  PDIST_RETURN_IF_ERROR(CheckExecutable(strategy));
  const int64_t world_size = WorldSizeOf(strategy, forward);
  PDIST_ASSIGN_OR_RETURN(DistributedPipelines pipelines, DistributedPipelinesFor(strategy, optimizer, world_size));
  PassContext context;
  context.strategy = strategy;
  ir::Program annotated = forward.Clone();
  PDIST_RETURN_IF_ERROR(RunPipeline(PrintPipeline(pipelines.annotate), annotated, context, "annotated forward program",
                                    pass_options));
  ir::Program eval = annotated.Clone();
  if (pipelines.eval_annotate != pipelines.annotate) {
    PassContext eval_context;
    eval_context.strategy = strategy;
    eval = forward.Clone();
    PDIST_RETURN_IF_ERROR(RunPipeline(PrintPipeline(pipelines.eval_annotate), eval, eval_context,
                                      "annotated forward program for evaluation", pass_options));
  }
  DistributedPrograms out{std::move(annotated), std::move(eval), {}, world_size, {}, std::move(pipelines)};
  PDIST_RETURN_IF_ERROR(
      RunPipeline(PrintPipeline(out.pipelines.train_tail), out.train, context, "training program", pass_options));
  PDIST_RETURN_IF_ERROR(
      RunPipeline(PrintPipeline(out.pipelines.eval_tail), out.eval, context, "evaluation program", pass_options));
  // Under ZeRO-3 the training program stores parameters sliced; evaluation reads those slices.
  PDIST_RETURN_IF_ERROR(WithContext(StoreLike(out.eval, out.train).status(), "evaluation program"));

  if (Pipelined(strategy)) {
    PipelinePlan& pipeline = out.pipeline;
    pipeline.micro_batches = context.micro_batching->count;
    pipeline.split_inputs = context.micro_batching->split_inputs;
    PDIST_ASSIGN_OR_RETURN(pipeline.schedule, ParseScheduleMode(strategy.pipeline.schedule_mode));
    pipeline.stages = strategy.pp_degree;
    pipeline.chunks = strategy.pipeline.vpp_degree;
    pipeline.ranks_per_stage = strategy.dp_degree * strategy.mp_degree;
  }
  out.meshes = MeshesOf(out.train);
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

}  // namespace pdist::passes
