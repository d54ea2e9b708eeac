// pdist-opt: reads a program (text or model.pb), runs a pass pipeline, writes the result.
//
//   pdist-opt model.pdir --passes=autodiff,optimizer{type=sgd} --print-after-all
//   pdist-opt model.pb --emit=text            # model.pb → textual IR
//   cat x.pdir | pdist-opt - --verify-only
//   pdist-opt model.pb --strategy dp2.json --passes=PIPELINE     # with PIPELINE rank 1's program:
//       annotate-strategy,autodiff,optimizer{type=adamw},completion,replicate-loss{world=2},partition{rank=1},fuse-allreduce
//
// Exit status: 0 success, 1 a bad input file or a failing pass (message names the file),
// 2 bad usage (unknown flag, bad flag value or pipeline).
#include <cstdio>
#include <iostream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "ir/output_file.h"
#include "ir/printer.h"
#include "ir/serialize.h"
#include "ir/status.h"
#include "passes/pass_manager.h"
#include "strategy/strategy.h"
#include "tools/cli.h"

namespace pdist {
namespace {

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "pdist-opt: %s\n", message.c_str());
  return code;
}

absl::StatusOr<ir::Program> ReadInput(const std::string& input) {
  if (input != "-") return ir::LoadProgramAuto(input);
  const std::string content((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  absl::StatusOr<ir::Program> program = ir::DecodeProgram(content);
  if (!program.ok()) return WithContext(program.status(), "<stdin>");
  return program;
}

absl::Status WriteOutput(const ir::Program& program, const std::string& emit, const std::string& given) {
  // "-" is stdout, as it is stdin for the input and for pdist-export and pdist-import (a file named "-" was written).
  const std::string output = given == "-" ? "" : given;
  if (emit == "pb" && !output.empty()) return ir::SaveProgram(program, output);
  std::string bytes;
  if (emit == "pb") {
    absl::StatusOr<std::string> serialized = ir::SerializeProgram(program);
    if (!serialized.ok()) return serialized.status();
    bytes = *std::move(serialized);
  } else {
    bytes = ir::PrintProgram(program);
  }
  if (output.empty()) {
    std::cout.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    std::cout.flush();
    return std::cout ? absl::OkStatus() : absl::InternalError("cannot write to stdout");
  }
  return ir::WriteFileAtomically(output, bytes);
}

int Main(int argc, char** argv) {
  std::string passes, emit = "text", output, strategy_path;
  bool print_before_all = false, print_after_all = false, verify_only = false, time_passes = false, explain = false;
  cli::FlagSet flags("pdist-opt", "INPUT [options]",
                     absl::StrCat("Reads a program (textual IR, model.pb, or - for stdin), runs a pass pipeline on it\n"
                                  "and writes the result. Passes:\n",
                                  passes::PassRegistry::Global().Help()));
  flags.String("passes", &passes, "pass pipeline, e.g. autodiff,optimizer{type=adamw}");
  flags.String("emit", &emit, "output form: text or pb");
  flags.String("o", &output, "write the output to FILE instead of stdout ('-': stdout)");
  flags.String("strategy", &strategy_path,
               "strategy JSON file (or the JSON itself) the passes follow where their options leave a choice "
               "(annotate-strategy, micro-batch, "
               "replicate-loss without options); pdist-export --strategy prints the engine's pipeline for it");
  flags.Bool("verify-only", &verify_only, "parse and verify the input and the --passes pipeline, run nothing, write nothing");
  flags.Bool("print-before-all", &print_before_all, "print the IR to stderr before each pass");
  flags.Bool("print-after-all", &print_after_all, "print the IR to stderr after each pass");
  flags.Bool("time-passes", &time_passes, "print each pass's wall time to stderr");
  flags.Bool("explain", &explain, "print what each pass did to stderr");
  const std::vector<std::string> args = flags.ParseOrExit(argc, const_cast<const char* const*>(argv));
  if (args.size() != 1) return Fail(2, absl::StrCat("expected one INPUT, got ", args.size(), " (see --help)"));
  if (emit != "text" && emit != "pb") return Fail(2, absl::StrCat("flag --emit: '", emit, "' is not text or pb"));

  passes::PassContext context;
  context.explain_each = explain;
  if (!strategy_path.empty()) {
    absl::StatusOr<std::string> text = strategy::ReadStrategyArgument(strategy_path);
    absl::StatusOr<strategy::Strategy> parsed =
        text.ok() ? strategy::ParseStrategy(*text) : absl::StatusOr<strategy::Strategy>(text.status());
    if (!parsed.ok()) {
      return Fail(2, absl::StrCat("flag --strategy: ", strategy::StrategyArgumentName(strategy_path), ": ",
                                  parsed.status().message()));
    }
    context.strategy = *std::move(parsed);
  }

  if (verify_only && !output.empty()) return Fail(2, "--verify-only writes nothing: drop -o");
  // The pipeline is read before the input, and under --verify-only too: an unknown pass or a bad
  // option is an error either way.
  passes::PassManager pm({.verify_each = true,
                          .print_before_all = print_before_all ? &std::cerr : nullptr,
                          .print_after_all = print_after_all ? &std::cerr : nullptr,
                          .time_passes = time_passes});
  absl::Status added = pm.AddPipeline(passes);
  if (!added.ok()) return Fail(2, absl::StrCat("flag --passes: ", added.message()));

  const std::string& input = args[0];
  absl::StatusOr<ir::Program> program = ReadInput(input);
  if (!program.ok()) return Fail(1, std::string(program.status().message()));
  if (verify_only) return 0;

  absl::StatusOr<bool> ran = pm.Run(*program, context);
  if (time_passes) std::cerr << pm.TimingReport();
  if (explain) {
    for (const std::string& line : context.explanations) std::cerr << "// " << line << "\n";
  }
  if (!ran.ok()) return Fail(1, absl::StrCat(input == "-" ? "<stdin>" : input, ": ", ran.status().message()));
  absl::Status written = WriteOutput(*program, emit, output);
  if (!written.ok()) return Fail(1, std::string(written.message()));
  return 0;
}

}  // namespace
}  // namespace pdist

int main(int argc, char** argv) { return pdist::Main(argc, argv); }
