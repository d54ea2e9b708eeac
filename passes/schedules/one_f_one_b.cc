// 1F1B (PipeDream-Flush, Megatron-LM's default): w = min(p−s−1, m) warm-up forwards on stage s,
// then one forward and one backward in turn, then the remaining backwards. At most p
// micro-batches' activations are alive on any stage.
//   p = 2, m = 4, stage 0:  F0 F1 B0 F2 B1 F3 B2 B3
#include <algorithm>

#include "passes/schedules/schedule_def.h"

namespace pdist::passes {

std::vector<ir::PipelineJob> OneFOneBOrder(
    const ScheduleShape& shape, int64_t stage,
    const std::function<void(int64_t micro_batch, std::vector<ir::PipelineJob>& jobs)>& emit_backward) {
  const int64_t p = shape.stages, m = shape.micro_batches;
  const int64_t warmup = std::min(p - stage - 1, m);
  std::vector<ir::PipelineJob> jobs;
  for (int64_t i = 0; i < warmup; ++i) jobs.push_back({ir::JobKind::kForward, i, 0});
  for (int64_t i = 0; i < m - warmup; ++i) {
    jobs.push_back({ir::JobKind::kForward, warmup + i, 0});
    emit_backward(i, jobs);
  }
  for (int64_t i = m - warmup; i < m; ++i) emit_backward(i, jobs);
  return jobs;
}

ScheduleDef OneFOneBSchedule() {
  return {.mode = ScheduleMode::k1F1B,
          .name = "1F1B",
          .summary = "warm-up forwards, then one forward / one backward: at most p activations alive",
          .build = [](const ScheduleShape& shape, int64_t stage) {
            return OneFOneBOrder(shape, stage, [](int64_t i, std::vector<ir::PipelineJob>& jobs) {
              jobs.push_back({ir::JobKind::kBackward, i, 0});
            });
          }};
}

}  // namespace pdist::passes
