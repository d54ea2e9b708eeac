// VPP (Megatron-LM's interleaved 1F1B): each stage holds v model chunks; virtual stage
// k = chunk·p + stage. Micro-batches go through chunk 0 in groups of p, then chunk 1, …; the
// backward walks the chunks the other way. Forward step k runs chunk (k mod pv)/p of
// micro-batch (k/pv)·p + k mod p, backward step k the same micro-batch's chunk v−1−(k mod pv)/p;
// warm-up min(2(p−s−1) + (v−1)p, mv) steps, or all mv when m == p. The bubble shrinks by v.
//   p = 2, m = 2, v = 2, stage 0:  F0.0 F1.0 F0.1 F1.1 B0.1 B1.1 B0.0 B1.0
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "passes/schedules/schedule_def.h"

namespace pdist::passes {
namespace {

ir::PipelineJob Step(int64_t step, bool forward, int64_t p, int64_t v) {
  const int64_t in_group = step % (p * v);
  const int64_t micro_batch = step / (p * v) * p + step % p;
  if (forward) return {ir::JobKind::kForward, micro_batch, in_group / p};
  return {ir::JobKind::kBackward, micro_batch, v - 1 - in_group / p};
}

}  // namespace

ScheduleDef InterleavedSchedule() {
  return {.mode = ScheduleMode::kVPP,
          .name = "VPP",
          .summary = "1F1B over v model chunks per stage (interleaved): bubble divided by v",
          .interleaves_chunks = true,
          .check_shape = [](const ScheduleShape& shape) -> absl::Status {
            // Megatron's interleaved schedule walks micro-batches in groups of p.
            if (shape.micro_batches % shape.stages != 0) {
              // Named as the strategy names them too (the schedule's words alone sent users looking).
              return absl::InvalidArgumentError(absl::StrCat(
                  "VPP needs micro_batches divisible by stages, got micro_batches=", shape.micro_batches,
                  ", stages=", shape.stages, " (pipeline.accumulate_steps, pp_degree)"));
            }
            return absl::OkStatus();
          },
          .build = [](const ScheduleShape& shape, int64_t stage) {
            const int64_t p = shape.stages, m = shape.micro_batches, v = shape.chunks;
            const int64_t total = m * v;
            const int64_t warmup = m == p ? total : std::min(2 * (p - stage - 1) + (v - 1) * p, total);
            std::vector<ir::PipelineJob> jobs;
            for (int64_t k = 0; k < warmup; ++k) jobs.push_back(Step(k, true, p, v));
            for (int64_t k = 0; k < total - warmup; ++k) {
              jobs.push_back(Step(warmup + k, true, p, v));
              jobs.push_back(Step(k, false, p, v));
            }
            for (int64_t k = total - warmup; k < total; ++k) jobs.push_back(Step(k, false, p, v));
            return jobs;
          }};
}

}  // namespace pdist::passes
