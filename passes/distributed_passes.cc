// The passes that turn a completed global program into what each rank runs, and the ones that
// prepare a program for a pipeline schedule: thin Pass wrappers, registered by
// RegisterDistributedPasses. The engine's pipelines (passes/distributed_programs.h) are made of
// these and the built-in ones, so `pdist-opt --passes=...` can replay any rank's program:
//
//   pdist-opt model.pb --strategy dp2_mp2.json --emit=text --passes=annotate-strategy,autodiff,
//     optimizer{type=adamw},completion,replicate-loss{world=4},partition{rank=1},fuse-allreduce
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/status.h"
#include "passes/amp.h"
#include "passes/distributed_programs.h"
#include "passes/fuse_allreduce.h"
#include "passes/inference.h"
#include "passes/loss_scaling.h"
#include "passes/micro_batch.h"
#include "passes/partition.h"
#include "passes/pass_registry.h"
#include "passes/recompute.h"
#include "passes/replicate_loss.h"
#include "passes/sharding.h"
#include "passes/regather.h"
#include "passes/stage_gradient_sums.h"
#include "passes/split_weight_grad.h"

namespace pdist::passes {
namespace {

// `micro-batch{n=4,avg=false}`: the forward program of one of n micro-batches
// (passes/micro_batch.h). Without n, the run's micro-batch count (Strategy::MicroBatches); avg
// (default true; the run's gradient_merge.avg under gradient merge) says whether the step's
// gradient is the micro-batches' mean or their sum. Records which inputs it cut
// (PassContext::micro_batching), so a runner can cut whole feeds the same way.
class MicroBatchPass : public Pass {
 public:
  MicroBatchPass(std::optional<int64_t> n, std::optional<bool> average) : n_(n), average_(average) {}
  static absl::StatusOr<std::unique_ptr<Pass>> Create(const PassOptions& options) {
    PassOptionReader reader("micro-batch", options);
    std::optional<int64_t> n;
    std::optional<bool> average;
    PDIST_RETURN_IF_ERROR(reader.Read("n", &n, /*min=*/1));
    PDIST_RETURN_IF_ERROR(reader.Read("avg", &average));
    PDIST_RETURN_IF_ERROR(reader.Finish());
    return std::make_unique<MicroBatchPass>(n, average);
  }
  std::string_view name() const override { return "micro-batch"; }
  PassOptions options() const override {
    PassOptions options;
    if (n_) options["n"] = absl::StrCat(*n_);
    if (average_) options["avg"] = *average_ ? "true" : "false";
    return options;
  }
  absl::StatusOr<bool> Run(ir::Program& program, PassContext& context) override {
    const strategy::Strategy& s = context.strategy;
    const int64_t n = n_.value_or(s.MicroBatches());
    const bool average = average_.value_or(!s.gradient_merge.enable || s.gradient_merge.avg);
    PDIST_ASSIGN_OR_RETURN(MicroBatchProgram micro, SplitMicroBatches(program, n, average));
    program = std::move(micro.program);
    context.Explain(name(), absl::StrCat(n, " micro-batches", average ? "" : " (gradients summed)",
                                         "; inputs cut along dim 0: ", absl::StrJoin(micro.split_inputs, ", ")));
    context.micro_batching = MicroBatching{n, std::move(micro.split_inputs)};
    return n > 1;
  }

 private:
  std::optional<int64_t> n_;
  std::optional<bool> average_;
};

// `regather`: the backward all-gathers sequence shards again instead of keeping the gathered
// activations (passes/regather.h).
class RegatherPass : public Pass {
 public:
  std::string_view name() const override { return "regather"; }
  absl::StatusOr<bool> Run(ir::Program& program, PassContext& context) override {
    PDIST_ASSIGN_OR_RETURN(Regathered r, RegatherInBackward(program));
    context.Explain(name(), absl::StrCat(r.values, " gathered activations regathered in the backward, ", r.bytes_saved,
                                         " bytes per micro-batch and rank no longer kept"));
    return r.values > 0;
  }
};

// `stage-gradient-sums`: a parameter's gradient shares from several pipeline stages (a tied
// embedding) summed once per step, in the optimizer job (passes/stage_gradient_sums.h).
class StageGradientSumsPass : public Pass {
 public:
  std::string_view name() const override { return "stage-gradient-sums"; }
  absl::StatusOr<bool> Run(ir::Program& program, PassContext& context) override {
    PDIST_ASSIGN_OR_RETURN(int64_t moved, SumStageGradientsOncePerStep(program));
    context.Explain(name(), absl::StrCat(moved, moved == 1 ? " parameter's" : " parameters'",
                                         " gradient shares from other stages summed once per step"));
    return moved > 0;
  }
};

// `split-weight-grad`: the backward split into activation gradients (B) and weight gradients
// (W) for the zero-bubble schedules (passes/split_weight_grad.h).
class SplitWeightGradPass : public Pass {
 public:
  std::string_view name() const override { return "split-weight-grad"; }
  absl::StatusOr<bool> Run(ir::Program& program, PassContext& context) override {
    PDIST_ASSIGN_OR_RETURN(WeightGradientSplit split, SplitWeightGradients(program));
    context.Explain(name(), absl::StrCat(split.matmuls_split, " matmul gradients split, ", split.weight_ops,
                                         " ops in W (backward_weight)"));
    return split.matmuls_split > 0 || split.weight_ops > 0;
  }
};

// A pass whose one option, `world`, names the ranks it makes a value whole on; without it, the
// ranks the run's strategy and the program's meshes name.
class ReplicateOnWorldPass : public Pass {
 public:
  template <typename P>
  static PassFactory Factory(const char* name) {
    return [name](const PassOptions& options) -> absl::StatusOr<std::unique_ptr<Pass>> {
      PassOptionReader reader(name, options);
      std::optional<int64_t> world;
      PDIST_RETURN_IF_ERROR(reader.Read("world", &world, /*min=*/1));
      PDIST_RETURN_IF_ERROR(reader.Finish());
      return std::make_unique<P>(world);
    };
  }
  explicit ReplicateOnWorldPass(std::optional<int64_t> world) : world_(world) {}
  PassOptions options() const override { return world_ ? PassOptions{{"world", absl::StrCat(*world_)}} : PassOptions{}; }
  absl::StatusOr<bool> Run(ir::Program& program, PassContext& context) override {
    return Replicate(program, world_.value_or(WorldSizeOf(context.strategy, program)), context);
  }

 protected:
  virtual absl::StatusOr<bool> Replicate(ir::Program& program, int64_t world, PassContext& context) = 0;

 private:
  std::optional<int64_t> world_;
};

// `replicate-loss{world=4}`: the loss made whole on every rank (passes/replicate_loss.h).
class ReplicateLossPass : public ReplicateOnWorldPass {
 public:
  using ReplicateOnWorldPass::ReplicateOnWorldPass;
  std::string_view name() const override { return "replicate-loss"; }

 protected:
  absl::StatusOr<bool> Replicate(ir::Program& program, int64_t world, PassContext& context) override {
    PDIST_ASSIGN_OR_RETURN(bool appended, ReplicateLoss(program, world));
    context.Explain(name(), appended ? absl::StrCat("loss resharded to Replicate on ", world, " ranks")
                                     : "the loss is already whole on every rank");
    return appended;
  }
};

// `replicate-outputs{world=4}`: every output whole on every rank (passes/replicate_loss.h).
class ReplicateOutputsPass : public ReplicateOnWorldPass {
 public:
  using ReplicateOnWorldPass::ReplicateOnWorldPass;
  std::string_view name() const override { return "replicate-outputs"; }

 protected:
  absl::StatusOr<bool> Replicate(ir::Program& program, int64_t world, PassContext& context) override {
    PDIST_ASSIGN_OR_RETURN(int64_t appended, ReplicateOutputs(program, world));
    context.Explain(name(), absl::StrCat(appended, " of ", program.outputs().size(),
                                         " outputs resharded to Replicate on ", world, " ranks"));
    return appended > 0;
  }
};

// `eval-mode`: dropout off (passes/inference.h).
class EvalModePass : public Pass {
 public:
  std::string_view name() const override { return "eval-mode"; }
  absl::StatusOr<bool> Run(ir::Program& program, PassContext& context) override {
    const int64_t switched = SetEvalMode(program);
    context.Explain(name(), absl::StrCat(switched, " ops set to is_test"));
    return switched > 0;
  }
};

// `prune-to-outputs`: only what the outputs need (passes/inference.h).
class PruneToOutputsPass : public Pass {
 public:
  std::string_view name() const override { return "prune-to-outputs"; }
  absl::StatusOr<bool> Run(ir::Program& program, PassContext& context) override {
    PDIST_ASSIGN_OR_RETURN(int64_t removed, PruneToOutputs(program));
    context.Explain(name(), absl::StrCat(removed, " ops no output needs removed"));
    return removed > 0;
  }
};

// `recompute{granularity=full,segments=layers}`: forward segments replayed in the backward
// (passes/recompute.h). Without an option, the run's recompute section says.
class RecomputePass : public Pass {
 public:
  RecomputePass(std::optional<RecomputeGranularity> granularity, std::optional<RecomputeSegments> segments)
      : granularity_(granularity), segments_(segments) {}
  static absl::StatusOr<std::unique_ptr<Pass>> Create(const PassOptions& options) {
    PassOptionReader reader("recompute", options);
    std::string granularity_name, segments_name;
    PDIST_RETURN_IF_ERROR(reader.Read("granularity", &granularity_name));
    PDIST_RETURN_IF_ERROR(reader.Read("segments", &segments_name));
    PDIST_RETURN_IF_ERROR(reader.Finish());
    std::optional<RecomputeGranularity> granularity;
    if (!granularity_name.empty()) {
      absl::StatusOr<RecomputeGranularity> parsed = ParseRecomputeGranularity(granularity_name);
      if (!parsed.ok()) return WithContext(parsed.status(), "pass 'recompute'");
      granularity = *parsed;
    }
    std::optional<RecomputeSegments> segments;
    if (!segments_name.empty()) {
      absl::StatusOr<RecomputeSegments> parsed = ParseRecomputeSegments(segments_name);
      if (!parsed.ok()) return WithContext(parsed.status(), "pass 'recompute'");
      segments = *parsed;
    }
    return std::make_unique<RecomputePass>(granularity, segments);
  }
  std::string_view name() const override { return "recompute"; }
  PassOptions options() const override {
    PassOptions out;
    if (granularity_) out["granularity"] = RecomputeGranularityName(*granularity_);
    if (segments_) out["segments"] = RecomputeSegmentsName(*segments_);
    return out;
  }
  absl::StatusOr<bool> Run(ir::Program& program, PassContext& context) override {
    RecomputeGranularity granularity = RecomputeGranularity::kFull;
    if (granularity_) {
      granularity = *granularity_;
    } else {
      PDIST_ASSIGN_OR_RETURN(granularity, ParseRecomputeGranularity(context.strategy.recompute.granularity));
    }
    RecomputeSegments segments = RecomputeSegments::kLayers;
    if (segments_) {
      segments = *segments_;
    } else {
      PDIST_ASSIGN_OR_RETURN(segments, ParseRecomputeSegments(context.strategy.recompute.segments));
    }
    PDIST_ASSIGN_OR_RETURN(RecomputeReport report, ApplyRecompute(program, granularity, segments));
    context.Explain(name(), absl::StrCat(RecomputeGranularityName(granularity), ": ", report.ops_replayed,
                                         " forward ops replayed in the backward over ", report.segments, " segments; ",
                                         report.values_dropped, " forward values (", report.bytes_dropped,
                                         " bytes) no longer kept for the backward"));
    return report.ops_replayed > 0;
  }

 private:
  std::optional<RecomputeGranularity> granularity_;
  std::optional<RecomputeSegments> segments_;
};

// `amp{dtype=bfloat16,level=o2}`: mixed precision on the forward program (passes/amp.h).
// Without options, the run's amp.dtype and amp.level; the custom op lists are always the run's.
class AmpPass : public Pass {
 public:
  AmpPass(std::string dtype, std::string level) : dtype_(std::move(dtype)), level_(std::move(level)) {}
  static absl::StatusOr<std::unique_ptr<Pass>> Create(const PassOptions& options) {
    PassOptionReader reader("amp", options);
    std::string dtype;
    std::string level;
    PDIST_RETURN_IF_ERROR(reader.Read("dtype", &dtype));
    PDIST_RETURN_IF_ERROR(reader.Read("level", &level));
    PDIST_RETURN_IF_ERROR(reader.Finish());
    if (!dtype.empty()) PDIST_RETURN_IF_ERROR(WithContext(ParseAmpDtype(dtype).status(), "pass 'amp'"));
    if (!level.empty()) PDIST_RETURN_IF_ERROR(WithContext(ParseAmpLevel(level).status(), "pass 'amp'"));
    return std::make_unique<AmpPass>(std::move(dtype), std::move(level));
  }
  std::string_view name() const override { return "amp"; }
  PassOptions options() const override {
    PassOptions options;
    if (!dtype_.empty()) options["dtype"] = dtype_;
    if (!level_.empty()) options["level"] = level_;
    return options;
  }
  absl::StatusOr<bool> Run(ir::Program& program, PassContext& context) override {
    PDIST_ASSIGN_OR_RETURN(ir::DataType dtype, ParseAmpDtype(dtype_.empty() ? context.strategy.amp.dtype : dtype_));
    PDIST_ASSIGN_OR_RETURN(AmpLevel level, ParseAmpLevel(level_.empty() ? context.strategy.amp.level : level_));
    const AmpCustomLists custom{context.strategy.amp.custom_white_list, context.strategy.amp.custom_black_list};
    PDIST_ASSIGN_OR_RETURN(AmpReport report, ApplyAmp(program, dtype, level, custom));
    context.Explain(name(), absl::StrCat(AmpLevelName(level), " ", ir::DataTypeName(dtype), ": ",
                                         report.low_precision_ops, " ops in ", ir::DataTypeName(dtype), ", ",
                                         report.low_precision_params, " parameters stored in it, ", report.casts,
                                         " casts"));
    return report.casts > 0 || report.low_precision_params > 0;
  }

 private:
  std::string dtype_;
  std::string level_;
};

// `loss-scaling{init=65536,incr_every=1000,decr_every=2,incr_ratio=2,decr_ratio=0.5}`: dynamic
// loss scaling (passes/loss_scaling.h). Options left out come from the run's amp keys.
class LossScalingPass : public Pass {
 public:
  explicit LossScalingPass(PassOptions options) : options_(std::move(options)) {}
  static absl::StatusOr<std::unique_ptr<Pass>> Create(const PassOptions& options) {
    PassOptionReader reader("loss-scaling", options);
    LossScalingConfig probe;
    PDIST_RETURN_IF_ERROR(Read(reader, probe));
    PDIST_RETURN_IF_ERROR(reader.Finish());
    return std::make_unique<LossScalingPass>(options);
  }
  std::string_view name() const override { return "loss-scaling"; }
  PassOptions options() const override { return options_; }
  absl::StatusOr<bool> Run(ir::Program& program, PassContext& context) override {
    const strategy::AmpConfig& amp = context.strategy.amp;
    LossScalingConfig config{amp.init_loss_scaling, amp.incr_every_n_steps, amp.decr_every_n_nan_or_inf, amp.incr_ratio,
                             amp.decr_ratio};
    PassOptionReader reader("loss-scaling", options_);
    PDIST_RETURN_IF_ERROR(Read(reader, config));
    PDIST_ASSIGN_OR_RETURN(LossScalingReport report, ApplyLossScaling(program, config));
    context.Explain(name(), absl::StrCat("initial scale ", config.init_loss_scaling, ", ", report.updates,
                                         " updates skipped when any gradient overflows; x", config.incr_ratio,
                                         " after ", config.incr_every_n_steps, " clean steps, x", config.decr_ratio,
                                         " after ", config.decr_every_n_nan_or_inf, " overflows"));
    return true;
  }

 private:
  static absl::Status Read(PassOptionReader& reader, LossScalingConfig& c) {
    PDIST_RETURN_IF_ERROR(reader.Read("init", &c.init_loss_scaling));
    // The range the strategy's amp.init_loss_scaling takes: a scale below 1 (or nan, inf) would be
    // a state the update op starts from and never questions.
    if (!(c.init_loss_scaling >= 1.0 && c.init_loss_scaling <= 3.0e38)) {
      return absl::InvalidArgumentError(
          absl::StrCat("pass 'loss-scaling': init ", c.init_loss_scaling, " must be in [1, 3e38]"));
    }
    // Out-of-range values of the rest are refused by update_loss_scaling's shape inference.
    PDIST_RETURN_IF_ERROR(reader.Read("incr_every", &c.incr_every_n_steps));
    PDIST_RETURN_IF_ERROR(reader.Read("decr_every", &c.decr_every_n_nan_or_inf));
    PDIST_RETURN_IF_ERROR(reader.Read("incr_ratio", &c.incr_ratio));
    return reader.Read("decr_ratio", &c.decr_ratio);
  }
  PassOptions options_;
};

// `sharding{stage=2,axis=dp,degree=2,accumulate_shards=true}`: ZeRO on a completed global
// program (passes/sharding.h). Without stage, the run's sharding.stage; axis defaults to the
// strategy meshes' "dp"; without degree, the run's sharding.degree (0 there, or not given: the
// whole axis); without accumulate_shards, the run's sharding.accumulate_shards.
class ShardingPass : public Pass {
 public:
  ShardingPass(std::optional<int64_t> stage, std::string axis, std::optional<int64_t> degree,
               std::optional<bool> accumulate_shards)
      : stage_(stage), axis_(std::move(axis)), degree_(degree), accumulate_shards_(accumulate_shards) {}
  static absl::StatusOr<std::unique_ptr<Pass>> Create(const PassOptions& options) {
    PassOptionReader reader("sharding", options);
    std::optional<int64_t> stage, degree;
    std::optional<bool> accumulate_shards;
    std::string axis = "dp";
    PDIST_RETURN_IF_ERROR(reader.Read("stage", &stage, /*min=*/1));
    PDIST_RETURN_IF_ERROR(reader.Read("axis", &axis));
    PDIST_RETURN_IF_ERROR(reader.Read("degree", &degree, /*min=*/1));
    PDIST_RETURN_IF_ERROR(reader.Read("accumulate_shards", &accumulate_shards));
    PDIST_RETURN_IF_ERROR(reader.Finish());
    if (stage && *stage > 3) {
      return absl::InvalidArgumentError(absl::StrCat("pass 'sharding': option 'stage' must be 1, 2 or 3, got ", *stage));
    }
    return std::make_unique<ShardingPass>(stage, std::move(axis), degree, accumulate_shards);
  }
  std::string_view name() const override { return "sharding"; }
  PassOptions options() const override {
    PassOptions options;
    if (stage_) options["stage"] = absl::StrCat(*stage_);
    if (axis_ != "dp") options["axis"] = axis_;
    if (degree_) options["degree"] = absl::StrCat(*degree_);
    if (accumulate_shards_) options["accumulate_shards"] = *accumulate_shards_ ? "true" : "false";
    return options;
  }
  absl::StatusOr<bool> Run(ir::Program& program, PassContext& context) override {
    const ShardingOptions options{.stage = stage_.value_or(context.strategy.sharding.stage),
                                  .axis = axis_,
                                  .degree = degree_.value_or(context.strategy.sharding.degree),
                                  .accumulate_shards =
                                      accumulate_shards_.value_or(context.strategy.sharding.accumulate_shards)};
    PDIST_ASSIGN_OR_RETURN(ShardingReport report, ShardOptimizer(program, options));
    context.Explain(name(), absl::StrCat("ZeRO stage ", options.stage, " along '", axis_, "'",
                                         options.degree > 0 ? absl::StrCat(" over groups of ", options.degree) : "",
                                         ": ", report.sharded, " parameters updated on slices, ",
                                         report.kept_whole.size(), " kept whole, ", report.reshards, " reshards added",
                                         report.reduced_per_micro_batch > 0
                                             ? absl::StrCat(", ", report.reduced_per_micro_batch,
                                                            " gradients reduce-scattered per micro-batch")
                                             : ""));
    for (const std::string& line : report.kept_whole) context.Explain(name(), line);
    return report.reshards > 0;
  }

 private:
  std::optional<int64_t> stage_;
  std::string axis_;
  std::optional<int64_t> degree_;
  std::optional<bool> accumulate_shards_;
};

// `partition{rank=1}`: the completed global program becomes rank 1's local program
// (passes/partition.h): local shapes, every reshard lowered to collectives.
class PartitionPass : public Pass {
 public:
  explicit PartitionPass(int64_t rank) : rank_(rank) {}
  static absl::StatusOr<std::unique_ptr<Pass>> Create(const PassOptions& options) {
    PassOptionReader reader("partition", options);
    int64_t rank = -1;
    PDIST_RETURN_IF_ERROR(reader.Read("rank", &rank));
    PDIST_RETURN_IF_ERROR(reader.Finish());
    if (rank < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("pass 'partition': option 'rank' is required and must be >= 0, got ", rank,
                       " (partition{rank=0} is rank 0's program)"));
    }
    return std::make_unique<PartitionPass>(rank);
  }
  std::string_view name() const override { return "partition"; }
  PassOptions options() const override { return {{"rank", absl::StrCat(rank_)}}; }
  absl::StatusOr<bool> Run(ir::Program& program, PassContext& context) override {
    const std::vector<ir::ProcessMesh> meshes = MeshesOf(program);
    if (meshes.empty()) {
      return absl::FailedPreconditionError("no value has a DistAttr: run completion before partition");
    }
    bool member = false;
    std::vector<std::string> names;
    for (const ir::ProcessMesh& mesh : meshes) {
      member = member || mesh.Contains(rank_);
      names.push_back(mesh.ToString());
    }
    if (!member) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", rank_, " is in none of the program's meshes (",
                                                     absl::StrJoin(names, "; "), ")"));
    }
    ReshardPlanCache own;
    ReshardPlanCache& plans = context.reshard_plans != nullptr ? *context.reshard_plans : own;
    const size_t ops_before = program.block().ops().size();
    PDIST_ASSIGN_OR_RETURN(ir::Program local, PartitionProgram(program, rank_, plans));
    program = std::move(local);
    context.Explain(name(), absl::StrCat("rank ", rank_, ": ", program.block().ops().size(), " local ops from ",
                                         ops_before, " global ones"));
    return true;
  }

 private:
  int64_t rank_;
};

// `fuse-allreduce{bucket_bytes=26214400}`: a local program's gradient all-reduces moved up to
// their producers and fused into buckets (passes/fuse_allreduce.h); 0: moved only.
class FuseAllReducePass : public Pass {
 public:
  explicit FuseAllReducePass(int64_t bucket_bytes) : bucket_bytes_(bucket_bytes) {}
  static absl::StatusOr<std::unique_ptr<Pass>> Create(const PassOptions& options) {
    PassOptionReader reader("fuse-allreduce", options);
    int64_t bytes = kDefaultGradientBucketBytes;
    PDIST_RETURN_IF_ERROR(reader.Read("bucket_bytes", &bytes));
    PDIST_RETURN_IF_ERROR(reader.Finish());
    if (bytes < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("pass 'fuse-allreduce': bucket_bytes must be >= 0 (0: no buckets), got ", bytes));
    }
    return std::make_unique<FuseAllReducePass>(bytes);
  }
  std::string_view name() const override { return "fuse-allreduce"; }
  PassOptions options() const override {
    return bucket_bytes_ == kDefaultGradientBucketBytes ? PassOptions{} : PassOptions{{"bucket_bytes", absl::StrCat(bucket_bytes_)}};
  }
  absl::StatusOr<bool> Run(ir::Program& program, PassContext& context) override {
    PDIST_ASSIGN_OR_RETURN(int64_t buckets, ScheduleGradientAllReduces(program, bucket_bytes_));
    context.Explain(name(), absl::StrCat(buckets, " buckets of up to ", bucket_bytes_, " bytes"));
    return true;
  }

 private:
  int64_t bucket_bytes_;
};

}  // namespace

absl::Status RegisterDistributedPasses(PassRegistry& registry) {
  PDIST_RETURN_IF_ERROR(registry.Register("micro-batch", "the forward program of one of n micro-batches",
                                          &MicroBatchPass::Create));
  PDIST_RETURN_IF_ERROR(registry.Register("regather",
                                          "all-gather sequence shards again in the backward instead of keeping them gathered (sp)",
                                          NoOptions<RegatherPass>("regather")));
  PDIST_RETURN_IF_ERROR(registry.Register("stage-gradient-sums",
                                          "sum a parameter's gradient shares from other pipeline stages once per step",
                                          NoOptions<StageGradientSumsPass>("stage-gradient-sums")));
  PDIST_RETURN_IF_ERROR(registry.Register("split-weight-grad",
                                          "split the backward into activation (B) and weight (W) gradients (ZBH1)",
                                          NoOptions<SplitWeightGradPass>("split-weight-grad")));
  PDIST_RETURN_IF_ERROR(registry.Register("replicate-loss", "reshard the loss to Replicate on every rank of the world",
                                          ReplicateOnWorldPass::Factory<ReplicateLossPass>("replicate-loss")));
  PDIST_RETURN_IF_ERROR(registry.Register("replicate-outputs", "reshard every output to Replicate on every rank of the world",
                                          ReplicateOnWorldPass::Factory<ReplicateOutputsPass>("replicate-outputs")));
  PDIST_RETURN_IF_ERROR(registry.Register("eval-mode", "run dropout as at inference (is_test)",
                                          NoOptions<EvalModePass>("eval-mode")));
  PDIST_RETURN_IF_ERROR(registry.Register("prune-to-outputs",
                                          "keep what the program's outputs need; drop the loss and unread data inputs",
                                          NoOptions<PruneToOutputsPass>("prune-to-outputs")));
  PDIST_RETURN_IF_ERROR(registry.Register("recompute",
                                          "replay forward segments in the backward instead of keeping their activations",
                                          &RecomputePass::Create));
  PDIST_RETURN_IF_ERROR(registry.Register("amp", "mixed precision: bf16/f16 casts around op lists (o1), low-precision parameters (o2)",
                                          &AmpPass::Create));
  PDIST_RETURN_IF_ERROR(registry.Register("loss-scaling",
                                          "dynamic loss scaling: scaled backward, unscaled gradients, steps skipped on overflow",
                                          &LossScalingPass::Create));
  PDIST_RETURN_IF_ERROR(registry.Register("sharding",
                                          "ZeRO 1/2/3: optimizer states (and gradients, parameters) sharded over dp",
                                          &ShardingPass::Create));
  PDIST_RETURN_IF_ERROR(registry.Register("partition",
                                          "a completed global program → one rank's local program (collectives explicit)",
                                          &PartitionPass::Create));
  PDIST_RETURN_IF_ERROR(registry.Register("fuse-allreduce",
                                          "move gradient all-reduces up to their producers; fuse them into buckets",
                                          &FuseAllReducePass::Create));
  return absl::OkStatus();
}

}  // namespace pdist::passes
