// Built-in passes: thin Pass wrappers over AppendBackward, AppendOptimizer,
// AnnotateFromStrategy and CompleteDistAttrs, and their registration (RegisterBuiltinPasses).
#include <optional>

#include "absl/strings/str_cat.h"
#include "ir/attribute.h"
#include "ir/printer.h"
#include "ir/status.h"
#include "passes/annotate_from_strategy.h"
#include "passes/autodiff.h"
#include "passes/completion.h"
#include "passes/fuse_gemm_epilogue.h"
#include "passes/fuse_optimizer.h"
#include "passes/optimizer.h"
#include "passes/pass_registry.h"
#include "passes/pipeline_stages.h"

namespace pdist::passes {

namespace {

// `autodiff`: appends the backward ops of the program's loss and records each parameter's
// gradient. Precondition: a loss and no gradients yet (checked by AppendBackward).
class AutodiffPass : public Pass {
 public:
  std::string_view name() const override { return "autodiff"; }
  absl::StatusOr<bool> Run(ir::Program& program, PassContext& context) override {
    const size_t ops_before = program.block().ops().size();
    PDIST_RETURN_IF_ERROR(AppendBackward(program, program.loss()));
    context.Explain(name(), absl::StrCat(program.block().ops().size() - ops_before, " backward ops, ",
                                         program.gradients().size(), " parameter gradients"));
    return true;
  }
};

// `optimizer{type=sgd|momentum|adamw,beta1=..,beta2=..,epsilon=..,weight_decay=..,momentum=..,
// use_nesterov=..}`: appends one optimizer op per parameter gradient and the `update` bindings.
// The learning rate is the data input "learning_rate", not an option.
class OptimizerPass : public Pass {
 public:
  explicit OptimizerPass(OptimizerConfig config) : config_(config) {}

  static absl::StatusOr<std::unique_ptr<Pass>> Create(const PassOptions& options) {
    OptimizerConfig config;
    PassOptionReader reader("optimizer", options);
    std::string type = OptimizerTypeName(config.type);
    PDIST_RETURN_IF_ERROR(reader.Read("type", &type));
    absl::StatusOr<OptimizerType> parsed = ParseOptimizerType(type);
    if (!parsed.ok()) return WithContext(parsed.status(), "pass 'optimizer'");
    config.type = *parsed;
    PDIST_RETURN_IF_ERROR(reader.Read("beta1", &config.beta1));
    PDIST_RETURN_IF_ERROR(reader.Read("beta2", &config.beta2));
    PDIST_RETURN_IF_ERROR(reader.Read("epsilon", &config.epsilon));
    PDIST_RETURN_IF_ERROR(reader.Read("weight_decay", &config.weight_decay));
    PDIST_RETURN_IF_ERROR(reader.Read("momentum", &config.momentum));
    PDIST_RETURN_IF_ERROR(reader.Read("use_nesterov", &config.use_nesterov));
    PDIST_RETURN_IF_ERROR(reader.Finish());
    PDIST_RETURN_IF_ERROR(WithContext(CheckOptimizerConfig(config), "pass 'optimizer'"));
    return std::make_unique<OptimizerPass>(config);
  }

  std::string_view name() const override { return "optimizer"; }

  PassOptions options() const override { return OptimizerPassOptions(config_); }

  absl::StatusOr<bool> Run(ir::Program& program, PassContext& context) override {
    PDIST_RETURN_IF_ERROR(AppendOptimizer(program, config_));
    context.Explain(name(), absl::StrCat(OptimizerTypeName(config_.type), " updates for ", program.gradients().size(),
                                         " parameters"));
    return true;
  }

 private:
  OptimizerConfig config_;
};

// `fuse-optimizer`: a program's sgd, momentum and adamw ops merged into multi-tensor merged ops
// (passes/fuse_optimizer.h).
class FuseOptimizerPass : public Pass {
 public:
  std::string_view name() const override { return "fuse-optimizer"; }
  absl::StatusOr<bool> Run(ir::Program& program, PassContext& context) override {
    const FuseOptimizerReport report = FuseOptimizerUpdates(program);
    context.Explain(name(), absl::StrCat(report.updates, " updates merged into ", report.merged_ops, " merged ops",
                                         report.roundings > 0 ? absl::StrCat(", ", report.roundings,
                                                                             " master-weight casts taken in")
                                                              : ""));
    return report.merged_ops > 0;
  }
};

// `fuse-gemm-epilogue`: matmul + bias add pairs made one fused_gemm_epilogue
// (passes/fuse_gemm_epilogue.h).
class FuseGemmEpiloguePass : public Pass {
 public:
  std::string_view name() const override { return "fuse-gemm-epilogue"; }
  absl::StatusOr<bool> Run(ir::Program& program, PassContext& context) override {
    const FuseGemmEpilogueReport report = FuseGemmEpilogues(program);
    context.Explain(name(), absl::StrCat(report.bias_adds, " matmul + bias add pairs fused into GEMM epilogues, ",
                                         report.gelus, " with their GELU; ", report.bias_grads,
                                         " bias gradients fused into weight-gradient GEMMs"));
    return report.bias_adds + report.bias_grads > 0;
  }
};

// `completion`: a DistAttr for every value from the annotated ones, and reshard ops where a
// consumer needs another DistAttr than its producer gives (passes/completion.h). Explains every
// value's DistAttr, one line each, after a summary line.
class CompletionPass : public Pass {
 public:
  std::string_view name() const override { return "completion"; }
  absl::StatusOr<bool> Run(ir::Program& program, PassContext& context) override {
    PDIST_ASSIGN_OR_RETURN(CompletionReport report, CompleteDistAttrs(program, {.explain = context.explain_each}));
    if (report.rounds == 0) {
      context.Explain(name(), "no value has a DistAttr: nothing to complete");
      return false;
    }
    context.Explain(name(), absl::StrCat(report.rounds, " propagation rounds, ", report.reshards,
                                         report.reshards == 1 ? " reshard" : " reshards", " inserted"));
    for (const std::string& line : report.explanations) context.Explain(name(), line);
    return report.changed;
  }
};

// `annotate-strategy{dp=2,mp=2,pp=1,sp=false}`: annotates a forward program's data inputs,
// Megatron tensor-parallel weights and (sp) sequence-parallel activations from the degrees
// (passes/annotate_from_strategy.h). Without options it follows the run's strategy
// (PassContext::strategy: degrees, per-tensor annotations, pipeline settings); each option
// given overrides that degree. Explains every annotation, one line each. A pipelined strategy
// (pp > 1, or several micro-batches) is cut into stages first (passes/pipeline_stages.h), each
// on its own mesh.
class AnnotateStrategyPass : public Pass {
 public:
  struct Degrees {
    std::optional<int64_t> dp, mp, pp;
    std::optional<bool> sp;
  };
  explicit AnnotateStrategyPass(Degrees degrees) : degrees_(degrees) {}

  static absl::StatusOr<std::unique_ptr<Pass>> Create(const PassOptions& options) {
    Degrees d;
    PassOptionReader reader("annotate-strategy", options);
    PDIST_RETURN_IF_ERROR(reader.Read("dp", &d.dp, /*min=*/1));
    PDIST_RETURN_IF_ERROR(reader.Read("mp", &d.mp, /*min=*/1));
    PDIST_RETURN_IF_ERROR(reader.Read("pp", &d.pp, /*min=*/1));
    PDIST_RETURN_IF_ERROR(reader.Read("sp", &d.sp));
    PDIST_RETURN_IF_ERROR(reader.Finish());
    return std::make_unique<AnnotateStrategyPass>(d);
  }

  std::string_view name() const override { return "annotate-strategy"; }

  // The options it was given, so the printed pipeline reads back into the same pass.
  PassOptions options() const override {
    PassOptions options;
    if (degrees_.dp) options["dp"] = absl::StrCat(*degrees_.dp);
    if (degrees_.mp) options["mp"] = absl::StrCat(*degrees_.mp);
    if (degrees_.pp) options["pp"] = absl::StrCat(*degrees_.pp);
    if (degrees_.sp) options["sp"] = *degrees_.sp ? "true" : "false";
    return options;
  }

  absl::StatusOr<bool> Run(ir::Program& program, PassContext& context) override {
    strategy::Strategy s = context.strategy;
    s.dp_degree = degrees_.dp.value_or(s.dp_degree);
    s.mp_degree = degrees_.mp.value_or(s.mp_degree);
    s.pp_degree = degrees_.pp.value_or(s.pp_degree);
    s.sp = degrees_.sp.value_or(s.sp);
    if (s.MicroBatched()) return RunStages(s, program, context);
    PDIST_ASSIGN_OR_RETURN(StrategyAnnotationPlan plan, AnnotateFromStrategyExplained(s, program));
    context.Explain(name(), absl::StrCat(plan.annotations.size(), " values annotated on mesh ", plan.mesh.ToString()));
    const ir::ValueNumbering n(program);
    for (const StrategyAnnotation& a : plan.annotations) {
      context.Explain(name(), absl::StrCat(n.Name(a.value), a.value->name().empty() ? "" : " '" + a.value->name() + "'",
                                           " ", ir::PlacementsToString(a.placements), " ← ", a.reason));
    }
    for (const std::string& note : plan.notes) context.Explain(name(), note);
    return !plan.annotations.empty();
  }

 private:
  // Pipelined: the stages of passes/pipeline_stages.h, each planned as above on its own mesh.
  absl::StatusOr<bool> RunStages(const strategy::Strategy& s, ir::Program& program, PassContext& context) {
    PDIST_ASSIGN_OR_RETURN(PipelineStages stages, AnnotatePipelineStages(s, program));
    for (size_t k = 0; k < stages.meshes.size(); ++k) {
      context.Explain(name(), absl::StrCat("stage ", k, " on mesh ", stages.meshes[k].ToString(), ", forward FLOPs ",
                                           stages.flops[k]));
    }
    context.Explain(name(), absl::StrCat(stages.boundary_reshards, " boundary reshards"));
    return true;
  }

  Degrees degrees_;
};

}  // namespace

absl::Status RegisterBuiltinPasses(PassRegistry& registry) {
  PDIST_RETURN_IF_ERROR(registry.Register("autodiff", "append the backward ops of the loss; record parameter gradients",
                                          NoOptions<AutodiffPass>("autodiff")));
  PDIST_RETURN_IF_ERROR(registry.Register("optimizer", "append sgd|momentum|adamw updates for every gradient",
                                          &OptimizerPass::Create));
  PDIST_RETURN_IF_ERROR(registry.Register("fuse-optimizer",
                                          "merge sgd|momentum|adamw updates of one kind, dtype and job into multi-tensor merged ops",
                                          NoOptions<FuseOptimizerPass>("fuse-optimizer")));
  PDIST_RETURN_IF_ERROR(registry.Register("fuse-gemm-epilogue",
                                          "fuse a matmul and the bias add of its product into one fused_gemm_epilogue",
                                          NoOptions<FuseGemmEpiloguePass>("fuse-gemm-epilogue")));
  PDIST_RETURN_IF_ERROR(registry.Register("annotate-strategy",
                                          "annotate data, Megatron tensor-parallel weights and sp activations from "
                                          "dp/mp/sp degrees",
                                          &AnnotateStrategyPass::Create));
  PDIST_RETURN_IF_ERROR(registry.Register("completion",
                                          "a DistAttr for every value from the annotated ones; insert reshard ops",
                                          NoOptions<CompletionPass>("completion")));
  return RegisterDistributedPasses(registry);
}

}  // namespace pdist::passes
