// FThenB: every forward, then every backward (GPipe). Simplest; holds every micro-batch's
// activations until its backward.
//   p = 2, m = 3, either stage:  F0 F1 F2 B0 B1 B2
#include "passes/schedules/schedule_def.h"

namespace pdist::passes {

ScheduleDef FThenBSchedule() {
  return {.mode = ScheduleMode::kFThenB,
          .name = "FThenB",
          .summary = "all forwards, then all backwards: every micro-batch's activations alive at once",
          .build = [](const ScheduleShape& shape, int64_t) {
            std::vector<ir::PipelineJob> jobs;
            for (int64_t i = 0; i < shape.micro_batches; ++i) jobs.push_back({ir::JobKind::kForward, i, 0});
            for (int64_t i = 0; i < shape.micro_batches; ++i) jobs.push_back({ir::JobKind::kBackward, i, 0});
            return jobs;
          }};
}

}  // namespace pdist::passes
