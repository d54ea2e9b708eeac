#include "planner/candidate.h"

#include "absl/strings/str_cat.h"
#include "passes/schedules/schedule_def.h"

namespace pdist::planner {

const char* RecomputeName(Recompute r) {
  switch (r) {
    case Recompute::kNone: return "none";
    case Recompute::kSelective: return "selective";
    case Recompute::kFull: return "full";
  }
  return "?";
}

int64_t Candidate::Complexity() const {
  return (pp > 1 ? 1 : 0) + (vpp > 1 ? 1 : 0) + (sp ? 1 : 0) + zero + (HybridZero() ? 1 : 0) + (accumulate_shards ? 1 : 0) +
         static_cast<int64_t>(recompute) + (passes::ScheduleDefOf(schedule).splits_backward ? 1 : 0) +
         (micro_batches > 1 ? 1 : 0);
}

std::string Candidate::ToString() const {
  std::string s = absl::StrCat("dp", dp, " mp", mp, " pp", pp);
  if (pp > 1) absl::StrAppend(&s, " ", passes::ScheduleModeName(schedule), vpp > 1 ? absl::StrCat("×", vpp) : "");
  absl::StrAppend(&s, " m", micro_batches, " b", micro_batch);
  if (sp) absl::StrAppend(&s, " sp");
  if (zero > 0) absl::StrAppend(&s, " zero", zero, HybridZero() ? absl::StrCat("/", ShardRanks()) : "");
  if (zero >= 2 && accumulate_shards) absl::StrAppend(&s, " acc-shards");
  if (recompute != Recompute::kNone) absl::StrAppend(&s, " rc-", RecomputeName(recompute));
  return s;
}

strategy::Strategy Candidate::ToStrategy(std::vector<std::string> split_before) const {
  strategy::Strategy s;
  s.dp_degree = dp;
  s.mp_degree = mp;
  s.pp_degree = pp;
  s.sp = sp;
  if (zero > 0) {
    s.sharding = {.enable = true, .stage = zero, .degree = ShardRanks(), .accumulate_shards = zero >= 2 && accumulate_shards};
  }
  s.pipeline.enable = pp > 1 || micro_batches > 1;
  s.pipeline.schedule_mode = passes::ScheduleModeName(schedule);
  s.pipeline.accumulate_steps = micro_batches;
  s.pipeline.micro_batch_size = micro_batch;
  s.pipeline.vpp_degree = vpp;
  s.pipeline.split_before = std::move(split_before);
  s.recompute.enable = recompute != Recompute::kNone;
  if (recompute == Recompute::kSelective) s.recompute.granularity = "selective";
  return s;
}

}  // namespace pdist::planner
