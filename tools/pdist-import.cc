// pdist-import: an ONNX model as model.pb, with a training loss appended.
//
//   pdist-import model.onnx -o model.pb --loss cross_entropy            # logits: the only output
//   pdist-import model.onnx -o model.pb --loss mse --logits y --labels target
//   pdist-import model.onnx -o model.pb --frozen 'blocks.*.mask' --input-shape tokens=8,128
//   pdist-import model.onnx --emit text                                 # forward program, no loss
//
// Exit status: 0 success, 1 the output cannot be written, 2 bad usage or a model pdist cannot
// import (the message names the operator, node, input or flag).
#include <cstdio>
#include <iostream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "import/onnx_import.h"
#include "ir/models/model_stats.h"
#include "ir/output_file.h"
#include "ir/printer.h"
#include "ir/serialize.h"
#include "tools/cli.h"

namespace pdist {
namespace {

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "pdist-import: %s\n", message.c_str());
  return code;
}

// "tokens=8,128;mask=8,128" → {"tokens": {8, 128}, "mask": {8, 128}}.
absl::Status ParseInputShapes(const std::string& text, std::map<std::string, std::vector<int64_t>>& out) {
  if (text.empty()) return absl::OkStatus();
  for (absl::string_view item : absl::StrSplit(text, ';', absl::SkipEmpty())) {
    std::vector<absl::string_view> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    for (absl::string_view& part : kv) part = absl::StripAsciiWhitespace(part);  // ' x = 8, 16 '
    if (kv.size() != 2 || kv[0].empty()) {
      return absl::InvalidArgumentError(absl::StrCat("flag --input-shape: '", item, "' is not NAME=D0,D1,..."));
    }
    // A name given twice was one shape of both lists' dims.
    auto [it, inserted] = out.try_emplace(std::string(kv[0]));
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat("flag --input-shape: '", kv[0], "' is given twice"));
    }
    std::vector<int64_t>& shape = it->second;
    // Every piece a dimension: '8,,16' was read as [8, 16].
    for (absl::string_view d : absl::StrSplit(kv[1], ',')) {
      d = absl::StripAsciiWhitespace(d);
      int64_t n = 0;
      // 0 imported, and the planner aborted on a batch of nothing.
      if (!absl::SimpleAtoi(d, &n) || n < 1) {
        return absl::InvalidArgumentError(absl::StrCat("flag --input-shape: '", d, "' in '", item, "' is not a dimension >= 1"));
      }
      shape.push_back(n);
    }
  }
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  onnx_import::OnnxImportOptions options;
  std::string output, emit = "pb", frozen, input_shapes;
  cli::FlagSet flags("pdist-import", "MODEL.onnx [options]",
                     "Reads an ONNX model (opset >= 13) and writes it as a pdist program: initializers become\n"
                     "parameters that carry their numbers, graph inputs become data inputs, and --loss appends a\n"
                     "training loss, after which pdist-plan plans it and pdist-train trains it under any strategy.\n"
                     "Supported operators and how they map: docs/onnx.md.");
  flags.String("o", &output, "output FILE (model.pb; text: stdout when absent or -)");
  flags.String("emit", &emit, "output form: pb (model.pb) or text (textual IR, without the weights' numbers)");
  flags.String("loss", &options.loss, "append a loss: cross_entropy (integer labels) or mse (float labels); none: forward only");
  flags.String("logits", &options.logits, "the graph output the loss reads (default: the only output)");
  flags.String("labels", &options.labels, "name of the labels data input the loss creates");
  flags.String("frozen", &frozen, "comma-separated initializer names or globs kept fixed ('blocks.*.mask')");
  flags.String("input-shape", &input_shapes, "static shapes for inputs with symbolic dims: 'tokens=8,128;mask=8,128'");
  const std::vector<std::string> args = flags.ParseOrExit(argc, const_cast<const char* const*>(argv));
  if (args.size() != 1) return Fail(2, absl::StrCat("expected one MODEL.onnx, got ", args.size(), " (see --help)"));
  if (emit != "pb" && emit != "text") return Fail(2, absl::StrCat("flag --emit: '", emit, "' is not pb or text"));
  if (emit == "pb" && (output.empty() || output == "-")) return Fail(2, "--emit pb needs an output file: -o model.pb");
  for (absl::string_view f : absl::StrSplit(frozen, ',', absl::SkipEmpty())) options.frozen.emplace_back(f);
  if (absl::Status s = ParseInputShapes(input_shapes, options.input_shapes); !s.ok()) return Fail(2, std::string(s.message()));

  absl::StatusOr<onnx_import::OnnxImport> imported = onnx_import::ImportOnnxFile(args[0], options);
  if (!imported.ok()) return Fail(2, std::string(imported.status().message()));
  if (emit == "pb") {
    if (absl::Status s = ir::SaveProgram(imported->program, output); !s.ok()) return Fail(1, std::string(s.message()));
  } else {
    const std::string text = ir::PrintProgram(imported->program);
    if (output.empty() || output == "-") {
      std::cout << text << std::flush;
    } else if (absl::Status s = ir::WriteFileAtomically(output, text); !s.ok()) {
      return Fail(1, std::string(s.message()));
    }
  }
  std::fprintf(stderr, "pdist-import: %s (opset %lld): %lld nodes, %lld parameters (%lld numbers)%s -> %s\n",
               args[0].c_str(), static_cast<long long>(imported->opset), static_cast<long long>(imported->nodes),
               static_cast<long long>(imported->parameters),
               static_cast<long long>(ir::models::CountParameters(imported->program)),
               options.loss.empty() ? ", no loss" : absl::StrCat(", loss ", options.loss).c_str(),
               output.empty() ? "stdout" : output.c_str());
  return 0;
}

}  // namespace
}  // namespace pdist

int main(int argc, char** argv) { return pdist::Main(argc, argv); }
