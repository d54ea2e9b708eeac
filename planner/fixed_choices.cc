#include "planner/fixed_choices.h"

#include <nlohmann/json.hpp>

#include "ir/json_reader.h"
#include "ir/status.h"
#include "strategy/strategy.h"

namespace pdist::planner {

absl::StatusOr<FixedChoices> FixedChoicesFromStrategyJson(const std::string& json_text) {
  PDIST_ASSIGN_OR_RETURN(strategy::Strategy s, strategy::ParseStrategy(json_text));
  if (!s.annotations.empty()) {
    return absl::InvalidArgumentError("the planner chooses placements itself: remove the strategy's 'annotations'");
  }
  if (s.amp.enable || s.gradient_merge.enable) {
    return absl::InvalidArgumentError("the planner does not plan 'amp' or 'gradient_merge'; set the model's dtype instead");
  }
  PDIST_ASSIGN_OR_RETURN(const nlohmann::json j, ir::ParseJson(json_text, "strategy"));
  auto has = [&j](const char* section, const char* key) {
    return j.contains(section) && j[section].is_object() && j[section].contains(key);
  };
  FixedChoices f;
  if (j.contains("dp_degree")) f.dp = s.dp_degree;
  if (j.contains("mp_degree")) f.mp = s.mp_degree;
  if (j.contains("pp_degree")) f.pp = s.pp_degree;
  if (j.contains("sp")) f.sp = s.sp;
  if (has("sharding", "enable") || has("sharding", "stage")) f.zero = s.sharding.enable ? s.sharding.stage : 0;
  if (has("sharding", "degree") && s.sharding.enable) f.zero_degree = s.sharding.degree;
  if (has("sharding", "accumulate_shards")) f.accumulate_shards = s.sharding.accumulate_shards;
  if (has("pipeline", "schedule_mode")) {
    PDIST_ASSIGN_OR_RETURN(f.schedule, passes::ParseScheduleMode(s.pipeline.schedule_mode));
  }
  if (has("pipeline", "vpp_degree")) f.vpp = s.pipeline.vpp_degree;
  if (has("pipeline", "accumulate_steps")) f.micro_batches = s.pipeline.accumulate_steps;
  if (has("pipeline", "micro_batch_size")) f.micro_batch = s.pipeline.micro_batch_size;
  if (has("recompute", "enable") || has("recompute", "granularity")) {
    f.recompute = !s.recompute.enable                        ? Recompute::kNone
                  : s.recompute.granularity == "selective" ? Recompute::kSelective
                                                           : Recompute::kFull;
  }
  return f;
}

}  // namespace pdist::planner
