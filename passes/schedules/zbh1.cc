// ZBH1 (zero-bubble H1, Qi et al. 2023): 1F1B's order of forwards and backwards, with each
// backward split into B (input gradients, which the previous stage waits for) and W (weight
// gradients, which only the optimizer reads). Stage s runs W(i−s) right after B(i) and the
// min(s, m) W's left over before the optimizer, filling the slots where 1F1B's stage s waits for
// the backward coming down from later stages. Same warm-up, so the same bound on live
// activations as 1F1B.
//   p = 3, m = 4, stage 1:  F0 F1 B0 F2 B1 W0 F3 B2 W1 B3 W2 W3
#include <algorithm>

#include "passes/schedules/schedule_def.h"

namespace pdist::passes {

ScheduleDef ZeroBubbleH1Schedule() {
  return {.mode = ScheduleMode::kZBH1,
          .name = "ZBH1",
          .summary = "1F1B with each backward split into B (input grads) and W (weight grads), W deferred",
          .splits_backward = true,
          .build = [](const ScheduleShape& shape, int64_t stage) {
            std::vector<ir::PipelineJob> jobs =
                OneFOneBOrder(shape, stage, [stage](int64_t i, std::vector<ir::PipelineJob>& out) {
                  out.push_back({ir::JobKind::kBackwardInput, i, 0});
                  if (i >= stage) out.push_back({ir::JobKind::kBackwardWeight, i - stage, 0});
                });
            for (int64_t i = std::max<int64_t>(shape.micro_batches - stage, 0); i < shape.micro_batches; ++i) {
              jobs.push_back({ir::JobKind::kBackwardWeight, i, 0});
            }
            return jobs;
          }};
}

}  // namespace pdist::passes
