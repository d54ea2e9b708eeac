#include "planner/fixed_choices.h"

#include <nlohmann/json.hpp>

#include "ir/json_reader.h"
#include "ir/status.h"
#include "strategy/strategy.h"

namespace pdist::planner {

absl::StatusOr<FixedChoices> FixedChoicesFromStrategyJson(const std::string& json_text) {
  PDIST_ASSIGN_OR_RETURN(const nlohmann::json j, ir::ParseJson(json_text, "strategy"));
  // An absent degree is the search's to choose: checks between keys see only the given ones.
  PDIST_ASSIGN_OR_RETURN(strategy::Strategy s, strategy::ParseStrategy(json_text, strategy::StrategyKeys::kGivenOnly));
  if (!s.annotations.empty()) {
    return absl::InvalidArgumentError("the planner chooses placements itself: remove the strategy's 'annotations'");
  }
  if (s.amp.enable) {
    return absl::InvalidArgumentError("the planner does not plan 'amp'; set the model's dtype instead");
  }
  if (s.gradient_merge.enable) {
    return absl::InvalidArgumentError(
        "the planner does not plan 'gradient_merge'; fix the micro-batches with 'pipeline.accumulate_steps' instead");
  }
  auto has = [&j](const char* section, const char* key) {
    return j.contains(section) && j[section].is_object() && j[section].contains(key);
  };
  // Keys the search has no choice for are refused, not dropped: the plan would not be the one
  // asked for, and -o would write the planner's value in place of the user's.
  // A section's details fix the planner's choice only where the section is on: with "enable"
  // false or left out, a strategy to run leaves them unused (Paddle's reading), and the plan
  // would drop them.
  const nlohmann::json defaults = nlohmann::json::parse(strategy::StrategyToJson(strategy::Strategy{}));
  for (const auto& [section, key] : {std::pair{"sharding", "stage"}, {"sharding", "degree"},
                                     {"sharding", "accumulate_shards"}, {"recompute", "granularity"}}) {
    if (!has(section, key)) continue;
    if (!has(section, "enable")) {
      return absl::InvalidArgumentError(absl::StrCat("'", section, ".", key, "' without '", section,
                                                     ".enable': add \"enable\": true to fix it (a strategy without "
                                                     "enable leaves it unused), or remove it"));
    }
    // Off, a detail at its default is what every written strategy holds (-o's own files): only
    // another value asks for something the plan cannot keep.
    const nlohmann::json& given = j[section][key];
    // (The default degree, the whole dp axis, is written by leaving the key out.)
    const nlohmann::json unset = defaults[section].contains(key) ? defaults[section][key] : nlohmann::json();
    if (!j[section]["enable"].get<bool>() && given != unset) {
      return absl::InvalidArgumentError(absl::StrCat("'", section, ".", key, "' ", given.dump(), " with '", section,
                                                     ".enable' false: the plan has none, so it cannot be kept; remove "
                                                     "it, or set enable true"));
    }
  }
  if (has("recompute", "segments") && s.recompute.segments != "layers") {
    return absl::InvalidArgumentError(absl::StrCat("the planner prices recompute by layers: 'recompute.segments' '",
                                                   s.recompute.segments, "' cannot be kept (remove it)"));
  }
  FixedChoices f;
  if (j.contains("dp_degree")) f.dp = s.dp_degree;
  if (j.contains("mp_degree")) f.mp = s.mp_degree;
  if (j.contains("pp_degree")) f.pp = s.pp_degree;
  if (j.contains("sp")) f.sp = s.sp;
  if (has("sharding", "enable")) {
    f.sharded = s.sharding.enable;
    if (!s.sharding.enable) f.zero = 0;
    if (s.sharding.enable && has("sharding", "stage")) f.zero = s.sharding.stage;
    if (s.sharding.enable && has("sharding", "degree")) f.zero_degree = s.sharding.degree;
  }
  if (has("sharding", "accumulate_shards")) f.accumulate_shards = s.sharding.accumulate_shards;
  if (has("pipeline", "schedule_mode")) {
    PDIST_ASSIGN_OR_RETURN(f.schedule, passes::ParseScheduleMode(s.pipeline.schedule_mode));
  }
  if (has("pipeline", "vpp_degree")) f.vpp = s.pipeline.vpp_degree;
  if (has("pipeline", "accumulate_steps")) f.micro_batches = s.pipeline.accumulate_steps;
  if (has("pipeline", "micro_batch_size")) f.micro_batch = s.pipeline.micro_batch_size;
  f.split_before = s.pipeline.split_before;  // empty or absent: the search cuts
  if (has("recompute", "enable")) {
    f.recomputed = s.recompute.enable;
    if (!s.recompute.enable) f.recompute = Recompute::kNone;
    if (s.recompute.enable && has("recompute", "granularity")) {
      f.recompute = s.recompute.granularity == "selective" ? Recompute::kSelective : Recompute::kFull;
    }
  }
  return f;
}

}  // namespace pdist::planner
