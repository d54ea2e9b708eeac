#include "ir/ops/merged_updates.h"

namespace pdist::ir {

const std::vector<MergedUpdate>& MergedUpdates() {
  // sgd(param, learning_rate, grad, skip_update?), momentum(param, grad, velocity,
  // learning_rate, skip_update?), adamw(param, grad, learning_rate, moment1, moment2, beta1_pow,
  // beta2_pow, skip_update?): ir/ops/optimizer.cc.
  static const auto* updates = new std::vector<MergedUpdate>{
      {"sgd", "merged_sgd", 1, 3, {0, 2}, 1},
      {"momentum", "merged_momentum", 3, 4, {0, 1, 2}, 2},
      {"adamw", "merged_adamw", 2, 7, {0, 1, 3, 4, 5, 6}, 5},
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
