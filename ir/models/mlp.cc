// BuildMlp: linear+relu stack with a linear head and a mean cross-entropy loss.
#include "ir/models/mlp.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "ir/models/layer_builder.h"
#include "ir/status.h"

namespace pdist::ir::models {

absl::Status ValidateMlpConfig(const MlpConfig& config) {
  PDIST_RETURN_IF_ERROR(RequireInRange("MlpConfig", "input", config.input));
  if (static_cast<int64_t>(config.hidden.size()) > kMaxModelLayers) {
    return absl::InvalidArgumentError(absl::StrCat("MlpConfig.hidden has ", config.hidden.size(),
                                                   " layers, more than ", kMaxModelLayers));
  }
  for (size_t i = 0; i < config.hidden.size(); ++i) {
    PDIST_RETURN_IF_ERROR(RequireInRange("MlpConfig", absl::StrCat("hidden[", i, "]"), config.hidden[i]));
  }
  PDIST_RETURN_IF_ERROR(RequireInRange("MlpConfig", "classes", config.classes));
  PDIST_RETURN_IF_ERROR(RequireInRange("MlpConfig", "batch", config.batch));
  if (!IsFloatingPoint(config.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat("MlpConfig.dtype must be floating point (f32 or f64), got ",
                                                   std::string(DataTypeName(config.dtype))));
  }
  return absl::OkStatus();
}

absl::StatusOr<Program> BuildMlp(const MlpConfig& config) {
  PDIST_RETURN_IF_ERROR(ValidateMlpConfig(config));
  Program program;
  LayerBuilder lb(&program, config.dtype);
  Value* x = lb.builder().Data("x", {{config.batch, config.input}, config.dtype});
  Value* labels = lb.builder().Data("labels", {{config.batch, 1}, DataType::kInt64});
  // He init (std sqrt(2/fan_in)) keeps activations at unit scale through the relu stack, so
  // small test MLPs learn in a few steps; the head uses std 1/sqrt(fan_in).
  int64_t fan_in = config.input;
  if (static_cast<int64_t>(config.hidden.size()) > kMaxModelLayers) {
    return absl::InvalidArgumentError(absl::StrCat("MlpConfig.hidden has ", config.hidden.size(),
                                                   " layers, more than ", kMaxModelLayers));
  }
  for (size_t i = 0; i < config.hidden.size(); ++i) {
    const LinearSpec spec{.init_std = std::sqrt(2.0 / static_cast<double>(fan_in))};
    PDIST_ASSIGN_OR_RETURN(x, lb.Linear(x, config.hidden[i], absl::StrCat("mlp.fc.", i), spec));
    PDIST_ASSIGN_OR_RETURN(x, lb.builder().Op1("relu", {x}));
    fan_in = config.hidden[i];
  }
  const LinearSpec head{.init_std = 1.0 / std::sqrt(static_cast<double>(fan_in))};
  PDIST_ASSIGN_OR_RETURN(Value * logits, lb.Linear(x, config.classes, "mlp.head", head));
  PDIST_ASSIGN_OR_RETURN(Value * loss, lb.SoftmaxCrossEntropyMean(logits, labels));
  program.set_loss(loss);
  program.add_output("logits", logits);
  return program;
}

int64_t MlpParameterCount(const MlpConfig& config) {
  int64_t count = 0;
  int64_t in = config.input;
  for (int64_t out : config.hidden) {
    count += in * out + out;
    in = out;
  }
  return count + in * config.classes + config.classes;
}

}  // namespace pdist::ir::models
