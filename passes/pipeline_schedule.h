// Pipeline schedules: the job list each stage (rank) runs in one step, and a simulator that runs
// the lists of all stages together to time them, measure bubbles and memory, and find deadlocks.
//
//   PDIST_ASSIGN_OR_RETURN(auto jobs, BuildSchedule(ScheduleMode::k1F1B, {.stages = 2, .micro_batches = 4}, 0));
//   JobsToString(jobs)   // "F0 F1 B0 F2 B1 F3 B2 B3 O"
//
// The modes and their names are Paddle's (FThenB, 1F1B, VPP, ZBH1); the orders are Megatron's
// (PipeDream-Flush and the interleaved schedule) and, for ZBH1, zero-bubble H1. Each is defined
// in its own file of passes/schedules/ (ScheduleDef: what it does, how it checks a shape, how it
// builds a stage's jobs); the executor runs the lists, the cost model simulates them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ir/pipeline_job.h"

namespace pdist::passes {

enum class ScheduleMode : int8_t {
  kFThenB,  // all forwards, then all backwards: simplest, holds every micro-batch's activations
  k1F1B,    // warm-up forwards, then one forward / one backward: at most p activations alive
  kVPP,     // 1F1B over v model chunks per stage (interleaved): bubble divided by v
  kZBH1,    // 1F1B with backward split into B (input grads) and W (weight grads), W deferred
};

// "FThenB", "1F1B", "VPP", "ZBH1" (exact). InvalidArgument listing the valid names otherwise.
absl::StatusOr<ScheduleMode> ParseScheduleMode(std::string_view name);
const char* ScheduleModeName(ScheduleMode mode);

// p stages, m micro-batches per step, v model chunks per stage.
struct ScheduleShape {
  int64_t stages = 1;
  int64_t micro_batches = 1;
  int64_t chunks = 1;
};

// InvalidArgument naming the offending values unless stages, micro_batches and chunks are ≥ 1,
// chunks > 1 goes with an interleaved schedule only, which has chunks ≥ 2, and the schedule's
// own check passes (VPP: micro_batches % stages == 0, as Megatron's interleaved schedule walks
// micro-batches in groups of p):
//   CheckScheduleShape(kVPP, {.stages = 2, .micro_batches = 5, .chunks = 2})
//   → "VPP needs micro_batches divisible by stages, got micro_batches=5, stages=2 (pipeline.accumulate_steps, pp_degree)"
absl::Status CheckScheduleShape(ScheduleMode mode, const ScheduleShape& shape);

// The jobs of `stage` (0-based), ending with the optimizer job {kOptimizer, 0, 0}.
// With w = min(p-s-1, m) warm-up forwards on stage s:
//   FThenB  F0 … F(m-1) B0 … B(m-1) O
//   1F1B    F0 … F(w-1), then F(w+i) B(i) for i < m-w, then B(m-w) … B(m-1), O
//   VPP     as 1F1B over m·v virtual micro-batches in Megatron's order: forward step k runs
//           chunk (k mod pv)/p of micro-batch (k/pv)·p + k mod p, backward step k the same
//           micro-batch's chunk v-1-(k mod pv)/p; warm-up min(2(p-s-1) + (v-1)p, mv) steps,
//           or all mv when m == p
//   ZBH1    as 1F1B with each B(i) a kBackwardInput followed by W(i-s) when i ≥ s; the
//           min(s, m) W's left over run before O in micro-batch order, filling the tail bubble
//   ZBH1, p=3, m=4, stage 1:  F0 F1 B0 F2 B1 W0 F3 B2 W1 B3 W2 W3 O
absl::StatusOr<std::vector<ir::PipelineJob>> BuildSchedule(ScheduleMode mode, const ScheduleShape& shape,
                                                           int64_t stage);

// The jobs separated by blanks: "F0 F1 B0 F2 B1 B2 O" (PipelineJob::ToString; chunks as "F3.1").
std::string JobsToString(const std::vector<ir::PipelineJob>& jobs);

// Durations of one job of each kind, in any unit. `backward` is an unsplit B, normally
// backward_input + backward_weight. `p2p` is added to every dependency between stages.
struct JobCosts {
  double forward = 1;
  double backward = 2;
  double backward_input = 1;
  double backward_weight = 1;
  double optimizer = 0;
  double p2p = 0;
  // Bytes a micro-batch's F keeps alive until its B (or W): weighs SimulatedSchedule's
  // peak_alive_bytes, so that chunks that keep more (the one holding the head) count for more.
  double activation_bytes = 0;
};

struct SimulatedJob {
  ir::PipelineJob job;
  double start = 0;
  double end = 0;
};

struct SimulatedSchedule {
  std::vector<std::vector<SimulatedJob>> stages;  // per stage, in execution order
  double makespan = 0;                            // end of the last job of any stage
  std::vector<double> bubble_fraction;            // per stage: (makespan - busy) / makespan
  // Per stage: the most (micro-batch, chunk) activations alive at once. One is alive from its
  // F until its B, or its W for a split backward (the W still reads the saved inputs).
  std::vector<int64_t> peak_in_flight;
  // Per stage: those alive when its first backward (B) job starts, that one included, and the
  // most alive when a later one starts (0: there is none). The first backward makes the
  // gradients, the later ones add into them: with few micro-batches per stage the activations
  // peak where the gradients do not exist yet (the planner's memory, planner/estimate.cc).
  std::vector<int64_t> alive_at_first_backward;
  std::vector<int64_t> alive_at_later_backwards;
  // Per stage: the most JobCosts::activation_bytes alive at once, summed over the (micro-batch,
  // chunk) pairs alive — with model chunks that keep different amounts, less than the largest
  // chunk's bytes times peak_in_flight.
  std::vector<double> peak_alive_bytes;
};

// Runs the job lists of all p = shape.stages stages together; each stage runs its list in order
// and starts a job at the later of its previous job's end and its dependencies' readiness.
// Chunk c of stage s is virtual stage k = c·p + s; virtual stage k±1 lives on stage (k±1) mod p.
//   F(mb, k)      needs F(mb, k-1)
//   B(mb, k)      needs F(mb, k) and, below the last virtual stage, B(mb, k+1)  (same for a
//                 kBackwardInput)
//   W(mb, k)      needs B(mb, k)
//   O             needs nothing but the stage's earlier jobs
// A dependency on another stage adds costs.p2p. Sends are buffered: no job waits for a receiver.
//   1F1B, 2 stages, 2 micro-batches, F=1 B=2:  stage 0  F0[0,1) F1[1,2) B0[4,6) B1[7,9)
//                                              stage 1  F0[1,2) B0[2,4) F1[4,5) B1[5,7)
// InvalidArgument when per_stage does not have p lists, a job's micro-batch or chunk is out of
// range, a cost is negative, a stage lacks or repeats one of its (kind, micro-batch, chunk) jobs
// (one F and one B, or one F, one B-input and one W, per micro-batch and chunk; at most one O),
// or mixes B with B-input/W for one micro-batch. FailedPrecondition on a deadlock, naming for
// every stuck stage the job it is stuck at and the job it waits for.
absl::StatusOr<SimulatedSchedule> SimulateSchedule(const std::vector<std::vector<ir::PipelineJob>>& per_stage,
                                                   const ScheduleShape& shape, const JobCosts& costs);

// The same with costs that differ between stages (the first holds the embedding, the last the
// head): one JobCosts per virtual stage k = chunk·p + stage; a dependency that crosses stages
// adds the p2p of the job that waits. InvalidArgument unless there are p × chunks of them.
absl::StatusOr<SimulatedSchedule> SimulateSchedule(const std::vector<std::vector<ir::PipelineJob>>& per_stage,
                                                   const ScheduleShape& shape,
                                                   const std::vector<JobCosts>& virtual_stage_costs);

}  // namespace pdist::passes
