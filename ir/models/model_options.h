// A built-in model named by its options — what pdist-export's flags, the C API's
// pdist_program_build and Python's pdist.models.gpt(...) describe — and its forward program.
//
//   ModelOptions o{.model = "gpt"};
//   PDIST_RETURN_IF_ERROR(SetModelOption(o, "layers", "4"));   // "layers=4" from a C or Python caller
//   PDIST_ASSIGN_OR_RETURN(Program p, BuildModel(o));
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ir/program.h"

namespace pdist::ir::models {

struct ModelOptions {
  std::string model;  // gpt, llama or mlp
  int64_t layers = 2, hidden = 64, heads = 4, vocab = 256, seq = 32, batch = 8, ffn = 0;
  int64_t input = 16, classes = 4;  // mlp only
  bool tied = false;
  double dropout = 0.0;
  std::string dtype = "f32";  // f32 or f64 here; bf16 (mixed precision) is the f32 model through
                              // the amp pass, applied by the callers that can (passes/amp.h)
};

// Sets one option from text: an integer, a number (dropout), true/false/1/0 (tied) or a dtype.
// InvalidArgument naming the key and the value, or the keys there are.
absl::Status SetModelOption(ModelOptions& options, const std::string& key, const std::string& value);

// "layers=4,hidden=128,tied=true": each pair through SetModelOption; empty text sets nothing.
absl::Status SetModelOptions(ModelOptions& options, const std::string& pairs);

// InvalidArgument for an unknown model or dtype and for an invalid config (naming the field:
// "GptConfig.hidden (64) must be divisible by GptConfig.heads (5)"). mlp gets `layers` relu
// layers of width `hidden`.
absl::StatusOr<Program> BuildModel(const ModelOptions& options);

}  // namespace pdist::ir::models
