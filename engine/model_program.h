// The forward program of a built-in model in any dtype pdist trains: f32 and f64 as built,
// bf16 as the f32 model through the amp pass at o2 (bf16 parameters and matmuls; norms, softmax
// and the loss in f32), which is what a strategy's amp {bfloat16, o2} trains. Shared by
// pdist-export --dtype and the C API's pdist_program_build.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "ir/models/model_options.h"
#include "ir/program.h"

namespace pdist::engine {

// f32, f64 or bf16.
bool IsModelDtype(const std::string& dtype);

// InvalidArgument for a dtype other than f32, f64 or bf16 (float16 needs the loss scaling a
// strategy's amp section adds, so it is not a model dtype), and as ir::models::BuildModel.
absl::StatusOr<ir::Program> BuildModelProgram(const ir::models::ModelOptions& options);

}  // namespace pdist::engine
