// BuildModelProgram: ir::models::BuildModel, and the amp pass for bf16.
#include "engine/model_program.h"

#include "absl/strings/str_cat.h"
#include "ir/status.h"
#include "passes/amp.h"

namespace pdist::engine {

bool IsModelDtype(const std::string& dtype) { return dtype == "f32" || dtype == "f64" || dtype == "bf16"; }

absl::StatusOr<ir::Program> BuildModelProgram(const ir::models::ModelOptions& options) {
  if (options.dtype == "bf16") {
    ir::models::ModelOptions f32 = options;
    f32.dtype = "f32";
    PDIST_ASSIGN_OR_RETURN(ir::Program program, ir::models::BuildModel(f32));
    PDIST_RETURN_IF_ERROR(passes::ApplyAmp(program, ir::DataType::kBFloat16, passes::AmpLevel::kO2).status());
    return program;
  }
  if (!IsModelDtype(options.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dtype '", options.dtype, "' is not f32, f64 or bf16 (for float16, build f32 and train with the strategy's "
        "amp {\"dtype\": \"float16\"}, which adds the loss scaling float16 needs)"));
  }
  return ir::models::BuildModel(options);
}

}  // namespace pdist::engine
