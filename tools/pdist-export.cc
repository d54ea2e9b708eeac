// pdist-export: builds a GPT, LLaMA or MLP forward program and writes it as model.pb or text.
//
//   pdist-export gpt --layers 2 --hidden 64 --heads 4 --vocab 256 --seq 32 --batch 8 -o model.pb
//   pdist-export llama --dtype f64 --emit text            # textual IR on stdout
//   pdist-export mlp --input 16 --layers 2 --hidden 32 --classes 4 -o mlp.pb
//   pdist-export gpt --strategy s.json --rank 1 --emit text   # rank 1's partitioned train program
//
// Exit status: 0 success, 1 the file cannot be written, 2 bad usage (unknown flag, bad value,
// an invalid model config — the message names the field).
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ir/models/model_stats.h"
#include "ir/output_file.h"
#include "ir/printer.h"
#include "ir/serialize.h"
#include "ir/status.h"
#include "passes/distributed_programs.h"
#include "passes/fuse_allreduce.h"
#include "tools/cli.h"
#include "tools/export_model.h"

namespace pdist {
namespace {

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "pdist-export: %s\n", message.c_str());
  return code;
}

absl::Status Write(const ir::Program& program, const std::string& emit, const std::string& output) {
  if (emit == "pb") return ir::SaveProgram(program, output);
  const std::string text = ir::PrintProgram(program);
  if (output.empty() || output == "-") {
    std::cout << text;
    std::cout.flush();
    return std::cout ? absl::OkStatus() : absl::UnavailableError("cannot write to stdout");
  }
  return ir::WriteFileAtomically(output, text);
}

// The strategy's global training (or evaluation) program, completed, or one rank's piece of it
// as that rank runs it. The pass pipeline that made it goes to stderr, so pdist-opt can replay it.
absl::StatusOr<ir::Program> Distribute(ir::Program model, const std::string& strategy_path, int64_t rank,
                                       const std::string& which) {
  PDIST_ASSIGN_OR_RETURN(std::string text, strategy::ReadStrategyArgument(strategy_path));
  absl::StatusOr<strategy::Strategy> parsed = strategy::ParseStrategy(text);
  if (!parsed.ok()) return WithContext(parsed.status(), strategy::StrategyArgumentName(strategy_path));
  strategy::Strategy strategy = *std::move(parsed);
  PDIST_ASSIGN_OR_RETURN(passes::DistributedPrograms programs,
                         passes::BuildDistributedPrograms(model, strategy, passes::OptimizerConfig{}));
  const bool train = which != "eval";
  ir::Program& global = train ? programs.train : programs.eval;
  std::string pipeline = train ? programs.pipelines.Train() : programs.pipelines.Eval();
  if (rank < 0) {
    std::fprintf(stderr, "pdist-export: passes: %s\n", pipeline.c_str());
    return std::move(global);
  }
  if (rank >= programs.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rank ", rank, " is out of range: the strategy has ", programs.world_size, " ranks"));
  }
  const std::string local =
      passes::RankPipeline(rank, train ? std::optional<int64_t>(passes::kDefaultGradientBucketBytes) : std::nullopt);
  std::fprintf(stderr, "pdist-export: passes: %s,%s\n", pipeline.c_str(), local.c_str());
  passes::ReshardPlanCache plans;
  return passes::LocalProgram(global, local, plans);
}

int Main(int argc, char** argv) {
  tools::ExportOptions options;
  std::string emit = "pb", output, strategy_path, which = "train";
  int64_t rank = -1;
  cli::FlagSet flags("pdist-export", "gpt|llama|mlp [options]",
                     "Builds a model's forward program (data inputs, parameters, a scalar loss) and writes\n"
                     "it as model.pb or as textual IR. Parameter names and init: docs/models.md.\n"
                     "gpt and llama use --layers --hidden --heads --vocab --seq --batch --ffn --tied\n"
                     "--dropout; mlp uses --input, --layers (relu layers) of width --hidden, --classes,\n"
                     "--batch.");
  tools::RegisterExportFlags(flags, &options);
  flags.String("emit", &emit, "output form: pb (model.pb) or text (textual IR)");
  flags.String("o", &output, "output FILE (text: stdout when absent or -)");
  flags.String("strategy", &strategy_path,
               "strategy JSON file (or the JSON itself): write the completed global training program (autodiff, "
               "AdamW, DistAttrs)");
  flags.Int("rank", &rank, "with --strategy: write this rank's partitioned (local) program instead");
  flags.String("program", &which, "with --strategy: train or eval");
  const std::vector<std::string> args = flags.ParseOrExit(argc, const_cast<const char* const*>(argv));

  if (args.size() != 1) {
    return Fail(2, absl::StrCat("expected one MODEL (gpt, llama or mlp), got ", args.size(), " (see --help)"));
  }
  if (emit != "pb" && emit != "text") return Fail(2, absl::StrCat("flag --emit: '", emit, "' is not pb or text"));
  if (emit == "pb" && (output.empty() || output == "-")) return Fail(2, "--emit pb needs an output file: -o model.pb");
  options.model = args[0];

  if (rank < -1) return Fail(2, absl::StrCat("--rank ", rank, ": must be >= 0"));  // -1: not given
  if (rank >= 0 && strategy_path.empty()) return Fail(2, "--rank needs --strategy");
  if (flags.Given("program") && strategy_path.empty()) return Fail(2, "--program needs --strategy");
  if (absl::Status s = tools::CheckFlagsApply(flags, options.model); !s.ok()) return Fail(2, std::string(s.message()));
  if (which != "train" && which != "eval") return Fail(2, absl::StrCat("flag --program: '", which, "' is not train or eval"));
  absl::StatusOr<ir::Program> program = tools::BuildExportModel(options);
  if (!program.ok()) return Fail(2, std::string(program.status().message()));
  if (!strategy_path.empty()) {
    program = Distribute(*std::move(program), strategy_path, rank, which);
    if (!program.ok()) return Fail(2, std::string(program.status().message()));
  }
  if (absl::Status s = Write(*program, emit, output); !s.ok()) return Fail(1, std::string(s.message()));

  // A summary on stderr, so that stdout stays the program when it is emitted there.
  absl::StatusOr<double> flops = ir::models::CountForwardFlops(*program);
  const std::string summary = absl::StrFormat(
      "%s, %d parameters, %s forward FLOPs per micro-batch -> %s", options.model,
      ir::models::CountParameters(*program), flops.ok() ? absl::StrFormat("%.4g", *flops) : "?",
      output.empty() ? "stdout" : output);
  std::fprintf(stderr, "pdist-export: %s\n", summary.c_str());
  return 0;
}

}  // namespace
}  // namespace pdist

int main(int argc, char** argv) { return pdist::Main(argc, argv); }
