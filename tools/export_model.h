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
#include "ir/models/model_options.h"
#include "ir/program.h"
#include "tools/cli.h"

namespace pdist::tools {

// The model and its options (ir/models/model_options.h); dtype may also be bf16 here.
using ExportOptions = ir::models::ModelOptions;

// --layers --hidden --heads --vocab --seq --batch --ffn --tied --dropout --input --classes --dtype.
void RegisterExportFlags(cli::FlagSet& flags, ExportOptions* options);

// OK unless the last parse gave a flag `model` has no use for (mlp: --heads --vocab --seq --ffn
// --tied --dropout; gpt and llama: --input --classes): it would be ignored, checks and all.
absl::Status CheckFlagsApply(const cli::FlagSet& flags, const std::string& model);

// engine::BuildModelProgram (bf16: the f32 model through the amp pass at o2); a bad dtype's
// error names the flag.
absl::StatusOr<ir::Program> BuildExportModel(const ExportOptions& options);

}  // namespace pdist::tools
