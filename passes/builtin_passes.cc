// Built-in passes: thin Pass wrappers over AppendBackward, AppendOptimizer,
// AnnotateFromStrategy and CompleteDistAttrs, and their registration (RegisterBuiltinPasses).
#include "absl/strings/str_cat.h"
#include "ir/attribute.h"
#include "ir/printer.h"
#include "ir/status.h"
#include "passes/annotate_from_strategy.h"
#include "passes/autodiff.h"
#include "passes/completion.h"
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
    if (!parsed.ok()) return Annotate(parsed.status(), "pass 'optimizer'");
    config.type = *parsed;
    PDIST_RETURN_IF_ERROR(reader.Read("beta1", &config.beta1));
    PDIST_RETURN_IF_ERROR(reader.Read("beta2", &config.beta2));
    PDIST_RETURN_IF_ERROR(reader.Read("epsilon", &config.epsilon));
    PDIST_RETURN_IF_ERROR(reader.Read("weight_decay", &config.weight_decay));
    PDIST_RETURN_IF_ERROR(reader.Read("momentum", &config.momentum));
    PDIST_RETURN_IF_ERROR(reader.Read("use_nesterov", &config.use_nesterov));
    PDIST_RETURN_IF_ERROR(reader.Finish());
    return std::make_unique<OptimizerPass>(config);
  }

  std::string_view name() const override { return "optimizer"; }

  // The type always (so the pipeline says which optimizer runs), other fields when they differ
  // from OptimizerConfig's defaults.
  PassOptions options() const override {
    const OptimizerConfig defaults;
    PassOptions options = {{"type", OptimizerTypeName(config_.type)}};
    auto put = [&options](const char* key, double value, double default_value) {
      if (value != default_value) options[key] = ir::DoubleToString(value);
    };
    put("beta1", config_.beta1, defaults.beta1);
    put("beta2", config_.beta2, defaults.beta2);
    put("epsilon", config_.epsilon, defaults.epsilon);
    put("weight_decay", config_.weight_decay, defaults.weight_decay);
    put("momentum", config_.momentum, defaults.momentum);
    if (config_.use_nesterov != defaults.use_nesterov) options["use_nesterov"] = config_.use_nesterov ? "true" : "false";
    return options;
  }

  absl::StatusOr<bool> Run(ir::Program& program, PassContext& context) override {
    PDIST_RETURN_IF_ERROR(AppendOptimizer(program, config_));
    context.Explain(name(), absl::StrCat(OptimizerTypeName(config_.type), " updates for ", program.gradients().size(),
                                         " parameters"));
    return true;
  }

 private:
  OptimizerConfig config_;
};

// `completion`: a DistAttr for every value from the annotated ones, and reshard ops where a
// consumer needs another DistAttr than its producer gives (passes/completion.h). Explains every
// value's DistAttr, one line each, after a summary line.
class CompletionPass : public Pass {
 public:
  std::string_view name() const override { return "completion"; }
  absl::StatusOr<bool> Run(ir::Program& program, PassContext& context) override {
    PDIST_ASSIGN_OR_RETURN(CompletionReport report, CompleteDistAttrs(program, {.explain = true}));
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
// (passes/annotate_from_strategy.h). Explains every annotation, one line each. With pp > 1 it
// cuts the program into stages first (passes/pipeline_stages.h), each on its own mesh.
class AnnotateStrategyPass : public Pass {
 public:
  explicit AnnotateStrategyPass(strategy::Strategy s) : strategy_(std::move(s)) {}

  static absl::StatusOr<std::unique_ptr<Pass>> Create(const PassOptions& options) {
    strategy::Strategy s;
    PassOptionReader reader("annotate-strategy", options);
    PDIST_RETURN_IF_ERROR(reader.Read("dp", &s.dp_degree));
    PDIST_RETURN_IF_ERROR(reader.Read("mp", &s.mp_degree));
    PDIST_RETURN_IF_ERROR(reader.Read("pp", &s.pp_degree));
    PDIST_RETURN_IF_ERROR(reader.Read("sp", &s.sp));
    PDIST_RETURN_IF_ERROR(reader.Finish());
    for (const auto& [key, degree] : {std::pair{"dp", s.dp_degree}, {"mp", s.mp_degree}, {"pp", s.pp_degree}}) {
      if (degree < 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("pass 'annotate-strategy': option '", key, "' must be >= 1, got ", degree));
      }
    }
    return std::make_unique<AnnotateStrategyPass>(std::move(s));
  }

  std::string_view name() const override { return "annotate-strategy"; }

  // dp and mp always; pp and sp when not their defaults.
  PassOptions options() const override {
    PassOptions options = {{"dp", absl::StrCat(strategy_.dp_degree)}, {"mp", absl::StrCat(strategy_.mp_degree)}};
    if (strategy_.pp_degree != 1) options["pp"] = absl::StrCat(strategy_.pp_degree);
    if (strategy_.sp) options["sp"] = "true";
    return options;
  }

  absl::StatusOr<bool> Run(ir::Program& program, PassContext& context) override {
    if (strategy_.pp_degree > 1) return RunStages(program, context);
    PDIST_ASSIGN_OR_RETURN(StrategyAnnotationPlan plan, AnnotateFromStrategyExplained(strategy_, program));
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
  // pp > 1: the stages of passes/pipeline_stages.h, each planned as above on its own mesh.
  absl::StatusOr<bool> RunStages(ir::Program& program, PassContext& context) {
    PDIST_ASSIGN_OR_RETURN(PipelineStages stages, AnnotatePipelineStages(strategy_, program));
    for (size_t s = 0; s < stages.meshes.size(); ++s) {
      context.Explain(name(), absl::StrCat("stage ", s, " on mesh ", stages.meshes[s].ToString(), ", forward FLOPs ",
                                           stages.flops[s]));
    }
    context.Explain(name(), absl::StrCat(stages.boundary_reshards, " boundary reshards"));
    return true;
  }

  strategy::Strategy strategy_;
};

// A factory for a pass without options.
template <typename P>
PassFactory NoOptions(const char* name) {
  return [name](const PassOptions& options) -> absl::StatusOr<std::unique_ptr<Pass>> {
    PDIST_RETURN_IF_ERROR(PassOptionReader(name, options).Finish());
    return std::make_unique<P>();
  };
}

}  // namespace

absl::Status RegisterBuiltinPasses(PassRegistry& registry) {
  PDIST_RETURN_IF_ERROR(registry.Register("autodiff", "append the backward ops of the loss; record parameter gradients",
                                          NoOptions<AutodiffPass>("autodiff")));
  PDIST_RETURN_IF_ERROR(registry.Register("optimizer", "append sgd|momentum|adamw updates for every gradient",
                                          &OptimizerPass::Create));
  PDIST_RETURN_IF_ERROR(registry.Register("annotate-strategy",
                                          "annotate data, Megatron tensor-parallel weights and sp activations from "
                                          "dp/mp/sp degrees",
                                          &AnnotateStrategyPass::Create));
  PDIST_RETURN_IF_ERROR(registry.Register("completion",
                                          "a DistAttr for every value from the annotated ones; insert reshard ops",
                                          NoOptions<CompletionPass>("completion")));
  return absl::OkStatus();
}

}  // namespace pdist::passes
