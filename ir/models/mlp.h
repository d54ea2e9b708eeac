// MLP classifier: a stack of linear+relu layers, a linear head, softmax cross-entropy.
//
//   PDIST_ASSIGN_OR_RETURN(ir::Program p, BuildMlp({.input = 16, .hidden = {32, 32}, .classes = 4}));
//   // data "x" f32[8,16], "labels" i64[8,1]; parameters mlp.fc.0.weight [16,32], mlp.fc.0.bias,
//   // mlp.fc.1.weight [32,32], mlp.fc.1.bias, mlp.head.weight [32,4], mlp.head.bias
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/program.h"
#include "ir/types.h"

namespace pdist::ir::models {

struct MlpConfig {
  int64_t input = 16;
  std::vector<int64_t> hidden = {32, 32};  // widths of the relu layers, in order (may be empty)
  int64_t classes = 4;
  int64_t batch = 8;
  DataType dtype = DataType::kFloat32;  // of "x" and the parameters
};

absl::Status ValidateMlpConfig(const MlpConfig& config);
// Labels are i64[batch, 1] class ids (cross_entropy_with_softmax's hard-label layout).
absl::StatusOr<Program> BuildMlp(const MlpConfig& config);
int64_t MlpParameterCount(const MlpConfig& config);

}  // namespace pdist::ir::models
