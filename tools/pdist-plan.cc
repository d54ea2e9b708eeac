// pdist-plan: the fastest strategy for a model on a cluster that fits in memory, written as a
// Strategy JSON that pdist-train runs unchanged, with the prediction and the reasons.
//
//   pdist-plan model.pb --gpus 16 -o plan.json                 # 16 A100s (dgx-a100), 8 per node
//   pdist-plan --model gpt:layers=96,hidden=12288,heads=96,vocab=51200,seq=2048,dtype=bf16
//              --gpus 1024 --cluster dgx-h100 --global-batch 1536 --explain
//   pdist-plan model.pb --cluster examples/clusters/pcie-4gpu.json --strategy fixed.json --json
//   pdist-plan --calibrate --gpus 4 -o cpu4.json                 # this machine as 4 CPU ranks
//   pdist-plan model.pb --cluster cpu-local --gpus 4              # measure, then plan
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "calibration/calibrate.h"
#include "ir/output_file.h"
#include "ir/serialize.h"
#include "ir/status.h"
#include "planner/fixed_choices.h"
#include "planner/report.h"
#include "planner/search.h"
#include "strategy/cluster.h"
#include "tools/cli.h"
#include "tools/progress_bar.h"

namespace pdist {
namespace {

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "pdist-plan: %s\n", std::string(status.message()).c_str());
  return 1;
}

struct Options {
  std::string model_spec, cluster = "dgx-a100", strategy_path, output;
  int64_t gpus = 0, global_batch = 0, seq = 0, top = 5, max_micro_batch = 0;
  double memory_margin = 0.10;
  bool explain = false, json = false, mp_across_nodes = false, quiet = false,
       calibrate = false;
};

absl::StatusOr<strategy::Cluster> CalibrateHere(const Options& o) {
  const int64_t ranks = o.gpus > 0 ? o.gpus : 4;
  return calibration::CalibrateCpu(ranks, [&](const std::string& what) {
    if (!o.quiet) std::fprintf(stderr, "calibrating %lld CPU ranks: %s\n", static_cast<long long>(ranks), what.c_str());
  });
}

// A cluster file when the path exists, cpu-local measured here, else a preset filled with
// --gpus devices.
absl::StatusOr<strategy::Cluster> ResolveCluster(const Options& o) {
  if (o.cluster == "cpu-local") return CalibrateHere(o);
  absl::StatusOr<strategy::Cluster> c = strategy::ClusterFromFileOrPreset(o.cluster, o.gpus);
  if (!c.ok()) {
    // The presets' list is the strategy layer's; cpu-local, measured here, is this tool's.
    absl::Status named = absl::IsNotFound(c.status())
                             ? absl::Status(c.status().code(), absl::StrCat(c.status().message(),
                                                                            "; or cpu-local: this machine, measured"))
                             : c.status();
    return WithContext(named, o.gpus > 0 ? "--cluster (with --gpus)" : "--cluster");
  }
  return c;
}

// The spec with its seq replaced by --seq's (appending it made "'seq' given twice" of a spec
// that had one, quoting a spec the user never typed).
std::string WithSeq(const std::string& spec, int64_t seq) {
  const size_t colon = spec.find(':');
  std::vector<std::string> items;
  if (colon != std::string::npos) {
    for (absl::string_view item : absl::StrSplit(spec.substr(colon + 1), ',')) {
      if (!absl::StartsWith(absl::StripAsciiWhitespace(item), "seq=")) items.emplace_back(item);
    }
  }
  items.push_back(absl::StrCat("seq=", seq));
  return absl::StrCat(spec.substr(0, colon), ":", absl::StrJoin(items, ","));
}

absl::StatusOr<planner::PlannedModel> ResolveModel(const Options& o, const std::vector<std::string>& args) {
  if (args.empty() == o.model_spec.empty()) {
    return absl::InvalidArgumentError("give either a MODEL file or --model SPEC (one of them)");
  }
  if (!o.model_spec.empty()) {
    const std::string spec = o.seq > 0 ? WithSeq(o.model_spec, o.seq) : o.model_spec;
    return planner::ModelFromSpec(spec, o.global_batch > 0 ? o.global_batch : 8);
  }
  PDIST_ASSIGN_OR_RETURN(ir::Program program, ir::LoadProgramAuto(args[0]));
  PDIST_ASSIGN_OR_RETURN(planner::PlannedModel model, planner::ModelFromProgram(std::move(program), args[0]));
  if (o.global_batch > 0 && o.global_batch != model.global_batch) {
    return absl::InvalidArgumentError(absl::StrCat("--global-batch ", o.global_batch, " but ", args[0], " has batch ",
                                                   model.global_batch, "; export it with --batch ", o.global_batch));
  }
  if (o.seq > 0 && o.seq != model.seq_len) {
    if (model.seq_len == 1) {
      return absl::InvalidArgumentError(absl::StrCat("--seq ", o.seq, " but ", args[0],
                                                     " has no sequence (its data input is not token ids)"));
    }
    return absl::InvalidArgumentError(absl::StrCat("--seq ", o.seq, " but ", args[0], " has sequence length ",
                                                   model.seq_len, "; export it with --seq ", o.seq));
  }
  return model;
}

absl::Status WriteFile(const std::string& path, const std::string& text) {
  return WithContext(ir::WriteFileAtomically(path, text + "\n"), "-o");
}

void RegisterFlags(cli::FlagSet& flags, Options* o) {
  flags.String("model", &o->model_spec, "a built-in model instead of a file: gpt:layers=L,hidden=H,heads=A,vocab=V,seq=S"
                                        "[,ffn=F,tied=1,dtype=bf16,f32_loss=1] (or llama:...; f32_loss: the loss on f32 logits)");
  flags.Int("gpus", &o->gpus, "devices: N of the --cluster preset, filled 8 per node");
  flags.String("cluster", &o->cluster, "a cluster JSON file or a preset: dgx-a100, dgx-a100-40gb, dgx-h100, hgx-h200, cpu-local "
                                       "(this machine as --gpus CPU ranks, measured now)");
  flags.Bool("calibrate", &o->calibrate, "measure this machine as --gpus CPU ranks (default 4) and print the cluster "
                                         "JSON (or write it to -o), then exit");
  flags.Int("global-batch", &o->global_batch, "sequences per step (a MODEL file has its own; --model default 8)");
  flags.Int("seq", &o->seq, "sequence length (overrides the --model spec's; must match a MODEL file)");
  flags.String("strategy", &o->strategy_path,
               "a Strategy JSON file, or the JSON itself ('{\"dp_degree\": 2}'), whose keys are kept (or refused, saying why); "
               "the planner searches the rest. A section's enable turns ZeRO or recompute on or off, its details the "
               "search's unless given; a detail needs its section enabled; pipeline.split_before prices that stage "
               "cut (a plan's own -o file reads back as the same plan; docs/cost_model.md)");
  flags.String("o", &o->output, "write the chosen Strategy JSON here (with --calibrate: the cluster JSON)");
  flags.Int("top", &o->top, "plans listed by --explain and in --json's top");
  flags.Bool("explain", &o->explain, "list the top plans side by side and why the others lost");
  flags.Bool("json", &o->json, "print one JSON object instead of the text report (--explain's layouts and reasons included)");
  flags.Bool("mp-across-nodes", &o->mp_across_nodes, "allow tensor parallelism beyond one node");
  flags.Double("memory-margin", &o->memory_margin, "fraction of device memory kept free (runtime, fragmentation)");
  flags.Int("max-micro-batch", &o->max_micro_batch,
            "largest micro-batch tried, in sequences (not given: 64, or as many as make 131,072 tokens where "
            "that is more)");
  flags.Bool("quiet", &o->quiet, "no progress line");
}

absl::Status CheckOptions(const Options& o, const std::vector<std::string>& args) {
  if (args.size() > 1) return absl::InvalidArgumentError(absl::StrCat("expected one MODEL, got ", args.size()));
  if (o.memory_margin < 0 || o.memory_margin >= 1) {
    return absl::InvalidArgumentError(absl::StrFormat("--memory-margin %g must be in [0, 1)", o.memory_margin));
  }
  if (o.top < 1) return absl::InvalidArgumentError(absl::StrCat("--top ", o.top, " must be >= 1"));
  // 0 means "not given" for these (the model's own, or the preset's default); below it is a typo,
  // not a request to use the default.
  for (const auto& [flag, value] : {std::pair<const char*, int64_t>{"--gpus", o.gpus},
                                    {"--global-batch", o.global_batch},
                                    {"--seq", o.seq},
                                    {"--max-micro-batch", o.max_micro_batch}}) {
    if (value < 0) return absl::InvalidArgumentError(absl::StrCat(flag, " ", value, " must be >= 1"));
  }
  if (o.calibrate && (!args.empty() || !o.model_spec.empty())) {
    return absl::InvalidArgumentError("--calibrate measures the machine; it takes no MODEL");
  }
  // Before the search or the calibration, not after it.
  if (!o.output.empty()) PDIST_RETURN_IF_ERROR(WithContext(ir::CheckOutputPath(o.output), "-o"));
  return absl::OkStatus();
}

// --calibrate: the cluster JSON on stdout or in -o.
absl::Status Calibrate(const Options& o) {
  PDIST_ASSIGN_OR_RETURN(strategy::Cluster measured, CalibrateHere(o));
  const std::string json = strategy::ClusterToJson(measured);
  if (o.output.empty()) {
    std::printf("%s\n", json.c_str());
    return absl::OkStatus();
  }
  PDIST_RETURN_IF_ERROR(WriteFile(o.output, json));
  std::printf("cluster written to %s\n", o.output.c_str());
  return absl::OkStatus();
}

// The search's options from the flags (and the --strategy file's fixed keys), with a progress bar.
absl::StatusOr<planner::SearchOptions> SearchOptionsFrom(const Options& o, std::unique_ptr<tools::ProgressBar>& bar) {
  planner::SearchOptions search;
  if (!o.strategy_path.empty()) {
    PDIST_ASSIGN_OR_RETURN(std::string text, strategy::ReadStrategyArgument(o.strategy_path));
    absl::StatusOr<planner::FixedChoices> fixed = planner::FixedChoicesFromStrategyJson(text);
    if (!fixed.ok()) return WithContext(fixed.status(), strategy::StrategyArgumentName(o.strategy_path));
    search.fixed = *fixed;
  }
  search.tensor_parallel_across_nodes = o.mp_across_nodes;
  search.max_micro_batch = o.max_micro_batch;
  search.estimate.memory_margin = o.memory_margin;
  search.progress = [&o, &bar](const planner::SearchProgress& p) {
    if (o.quiet) return;
    if (!bar) bar = std::make_unique<tools::ProgressBar>(p.factorisations, stderr, 1, "dp×mp×pp");
    bar->Update(p.factorisations_done,
                absl::StrFormat("%d priced  best %s", p.priced,
                                p.best_step_time > 0 ? absl::StrFormat("%.4g s", p.best_step_time) : "-"));
  };
  return search;
}

// Searches, writes -o, and prints the report (text or --json).
absl::Status Plan(const Options& o, const std::vector<std::string>& args) {
  PDIST_ASSIGN_OR_RETURN(strategy::Cluster cluster, ResolveCluster(o));
  PDIST_ASSIGN_OR_RETURN(planner::PlannedModel model, ResolveModel(o, args));
  std::unique_ptr<tools::ProgressBar> bar;
  PDIST_ASSIGN_OR_RETURN(planner::SearchOptions search, SearchOptionsFrom(o, bar));
  absl::StatusOr<planner::SearchResult> result = planner::Search(model, cluster, search);
  if (bar) bar->Finish();
  PDIST_RETURN_IF_ERROR(result.status());
  if (!o.output.empty()) PDIST_RETURN_IF_ERROR(WriteFile(o.output, planner::PlanStrategyJson(result->best())));
  if (o.json) {
    std::printf("%s\n", planner::ReportJson(*result, cluster, o.top).dump(2).c_str());
    return absl::OkStatus();
  }
  std::printf("model: %s, global batch %lld, %s\n", model.description.c_str(),
              static_cast<long long>(model.global_batch), cluster.name.c_str());
  std::printf("%s", planner::ReportText(*result, cluster).c_str());
  if (o.explain) std::printf("\n%s", planner::ExplainText(*result, o.top).c_str());
  if (!o.output.empty()) std::printf("strategy written to %s\n", o.output.c_str());
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  Options o;
  cli::FlagSet flags("pdist-plan", "MODEL | --model SPEC  [--gpus N] [--cluster FILE|PRESET] [options]",
                     "Finds the fastest strategy (data, tensor, pipeline and sequence parallelism, ZeRO, "
                     "micro-batching, schedule, recompute) that fits the cluster's memory, prints the prediction "
                     "and writes the Strategy JSON pdist-train runs.");
  RegisterFlags(flags, &o);
  const std::vector<std::string> args = flags.ParseOrExit(argc, argv);
  absl::Status status = CheckOptions(o, args);
  if (status.ok()) status = o.calibrate ? Calibrate(o) : Plan(o, args);
  return status.ok() ? 0 : Fail(status);
}

}  // namespace
}  // namespace pdist

int main(int argc, char** argv) { return pdist::Main(argc, argv); }
