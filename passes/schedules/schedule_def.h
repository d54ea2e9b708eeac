// ScheduleDef: one pipeline schedule, defined in one file of passes/schedules/ and listed once
// in registry.cc. Code that depends on a schedule asks what it does (splits_backward,
// interleaves_chunks), never which one it is.
//
//   const ScheduleDef& zbh1 = ScheduleDefOf(ScheduleMode::kZBH1);
//   zbh1.splits_backward    // true: the program needs split-weight-grad, the job lists W jobs
//   zbh1.build({.stages = 3, .micro_batches = 4}, 1)   // F0 F1 B0 F2 B1 W0 F3 B2 W1 B3 W2 W3
//
// Adding a schedule: a ScheduleMode value (its identity, as an op's name), a file here defining
// its ScheduleDef, and one line in registry.cc. The executor runs whatever job list `build`
// returns; the simulator (passes/pipeline_schedule.h) times it; the planner searches it.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "ir/pipeline_job.h"
#include "passes/pipeline_schedule.h"

namespace pdist::passes {

struct ScheduleDef {
  ScheduleMode mode;
  const char* name;     // Paddle's schedule_mode: "FThenB", "1F1B", "VPP", "ZBH1"
  const char* summary;  // one line for --help and docs
  // The backward of each micro-batch runs as a B-input job and a later W job (weight
  // gradients), so the program must be split by the split-weight-grad pass.
  bool splits_backward = false;
  // Runs several model chunks per stage (pipeline.vpp_degree ≥ 2); every other schedule runs one.
  bool interleaves_chunks = false;
  // Shape constraints beyond the common ones (stages, micro_batches, chunks ≥ 1; chunks as
  // interleaves_chunks says), or nullptr. InvalidArgument naming the values.
  std::function<absl::Status(const ScheduleShape&)> check_shape;
  // The jobs of `stage` before the optimizer job, for a shape that passed the checks.
  std::function<std::vector<ir::PipelineJob>(const ScheduleShape&, int64_t stage)> build;
};

// Every schedule, in the order of ScheduleMode.
const std::vector<ScheduleDef>& ScheduleDefs();
const ScheduleDef& ScheduleDefOf(ScheduleMode mode);

// The definitions, one per file (registry.cc lists them).
ScheduleDef FThenBSchedule();
ScheduleDef OneFOneBSchedule();
ScheduleDef InterleavedSchedule();
ScheduleDef ZeroBubbleH1Schedule();

// 1F1B's order of forwards and backwards on `stage`, with each backward as `emit_backward(i)`
// emits it: shared by 1F1B (one B job) and ZBH1 (a B-input job, then a W job some steps later).
std::vector<ir::PipelineJob> OneFOneBOrder(
    const ScheduleShape& shape, int64_t stage,
    const std::function<void(int64_t micro_batch, std::vector<ir::PipelineJob>& jobs)>& emit_backward);

}  // namespace pdist::passes
