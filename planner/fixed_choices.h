// The choices a user's strategy file fixes for the search: `pdist-plan --strategy s.json` keeps
// every key the file sets and searches the rest, or refuses a key it cannot keep; a file that sets
// every key the search chooses is priced as it is.
//
//   {"mp_degree": 8, "pp_degree": 6}                     → mp and pp fixed
//   {"pipeline": {"schedule_mode": "VPP", "vpp_degree": 2}} → the schedule fixed
//   {"sharding": {"enable": false}}                       → no ZeRO
//   {"sharding": {"enable": true}}                        → ZeRO, its stage the search's
//   {"sharding": {"stage": 2}}                            → refused: without enable a strategy
//                                                           does not shard (add "enable": true)
//   {"sharding": {"enable": false, "stage": 3}}           → refused: stage 3 of no ZeRO
//   {"pipeline": {"split_before": ["gpt.h.12.*"]}}        → 2 virtual stages cut there (pp 2, or
//                                                           a cut its segments do not allow refused)
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "planner/search.h"

namespace pdist::planner {

// The file is first read as a Strategy (its errors name the key); per-tensor annotations, amp,
// gradient merge and recompute segments other than layers are InvalidArgument: the planner does
// not plan them, and would drop them. A stage cut is checked against the model by the search.
absl::StatusOr<FixedChoices> FixedChoicesFromStrategyJson(const std::string& json_text);

}  // namespace pdist::planner
