#include "ir/ops/merged_updates.h"

namespace pdist::ir {

const std::vector<MergedUpdate>& MergedUpdates() {
  // sgd(param, learning_rate, grad, skip_update?), momentum(param, grad, velocity,
  // learning_rate, skip_update?), adamw(param, grad, learning_rate, moment1, moment2, beta1_pow,
  // beta2_pow, skip_update?): ir/ops/optimizer.cc.
  static const auto* updates = new std::vector<MergedUpdate>{
      {.base = "sgd", .merged = "merged_sgd", .learning_rate = 1, .skip_update = 3, .grad = 2,
       .per_parameter = {0, 2}, .results = 1},
      {.base = "momentum", .merged = "merged_momentum", .learning_rate = 3, .skip_update = 4, .grad = 1,
       .per_parameter = {0, 1, 2}, .results = 2},
      {.base = "adamw", .merged = "merged_adamw", .learning_rate = 2, .skip_update = 7, .grad = 1,
       .per_parameter = {0, 1, 3, 4, 5, 6}, .results = 5},
  };
  return *updates;
}

const MergedUpdate* MergedUpdateOfBase(const std::string& type) {
  for (const MergedUpdate& m : MergedUpdates()) {
    if (m.base == type) return &m;
  }
  return nullptr;
}

const MergedUpdate* MergedUpdateOfMerged(const std::string& type) {
  for (const MergedUpdate& m : MergedUpdates()) {
    if (m.merged == type) return &m;
  }
  return nullptr;
}

}  // namespace pdist::ir
