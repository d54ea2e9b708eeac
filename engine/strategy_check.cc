// CheckSingleRankStrategy.
#include "engine/strategy_check.h"

#include "absl/strings/str_cat.h"
#include "ir/status.h"
#include "strategy/strategy.h"

namespace pdist::engine {

absl::Status CheckSingleRankStrategy(const std::string& strategy_json) {
  if (strategy_json.empty()) return absl::OkStatus();
  PDIST_ASSIGN_OR_RETURN(strategy::Strategy s, strategy::ParseStrategy(strategy_json));
  if (s.WorldSize() > 1) {
    return absl::UnimplementedError(absl::StrCat("the strategy needs ", s.WorldSize(),
                                                 " ranks (dp × mp × pp); this build runs one rank only"));
  }
  if (s.sharding.enable || s.pipeline.enable || s.recompute.enable || s.amp.enable || s.gradient_merge.enable) {
    return absl::UnimplementedError("sharding, pipeline, recompute, amp and gradient_merge are not implemented yet");
  }
  return absl::OkStatus();
}

}  // namespace pdist::engine
