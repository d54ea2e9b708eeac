// The model flags of pdist-export and the program they describe, apart from main() so tests
// can drive them.
//
//   ExportOptions o;
//   cli::FlagSet flags("pdist-export", "gpt|llama|mlp [options]");
//   RegisterExportFlags(flags, &o);
//   o.model = flags.Parse(argc, argv)->at(0);                  // "gpt"
//   PDIST_ASSIGN_OR_RETURN(ir::Program p, BuildExportModel(o));
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "ir/program.h"
#include "tools/cli.h"

namespace pdist::tools {

struct ExportOptions {
  std::string model;  // gpt, llama or mlp (the positional argument)
  int64_t layers = 2, hidden = 64, heads = 4, vocab = 256, seq = 32, batch = 8, ffn = 0;
  int64_t input = 16, classes = 4;  // mlp only
  bool tied = false;
  double dropout = 0.0;
  std::string dtype = "f32";  // f32 or f64
};

// --layers --hidden --heads --vocab --seq --batch --ffn --tied --dropout --input --classes --dtype.
void RegisterExportFlags(cli::FlagSet& flags, ExportOptions* options);

// InvalidArgument for an unknown model or dtype and for an invalid config (naming the field:
// "GptConfig.hidden (64) must be divisible by GptConfig.heads (5)"). mlp gets `layers` relu
// layers of width `hidden`.
absl::StatusOr<ir::Program> BuildExportModel(const ExportOptions& options);

}  // namespace pdist::tools
