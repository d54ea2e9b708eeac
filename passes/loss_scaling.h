// Dynamic loss scaling (Micikevicius et al., 2018; Paddle's amp with use_dynamic_loss_scaling):
// the backward starts from the loss scale instead of 1, so small f16 gradients do not flush to
// zero; before the updates every gradient is unscaled and counted for inf/nan, and a step with
// any overflow on any rank is skipped by every update while the scale shrinks.
//
//   %s = state "amp.loss_scaling" : f32[1] {init = "const(32768.0)"}
//   %20 = reshape(%s) {shape = []} : f32[] @backward           was: full() {value = 1.0}
//   ...                                                          (the backward, scaled)
//   %60 = divide(%one, %s)                    @optimizer         1 / scale
//   %61 = multiply(cast(%g, f32), %60)        @optimizer         the unscaled gradient, in f32
//   %62 = count_nonfinite(%61) : f32[]        @optimizer
//   %70 = add(%62, %66) ...                                      every count, summed
//   %71, %s', ... = update_loss_scaling(%70, %s, %good, %bad, %skipped)
//   %80, ... = adamw(%master, %61, %lr, ..., %71)                skip_update = %71
//
// Needs the optimizer's updates (run after the optimizer pass, before completion). Every
// unscaled gradient exists before the first update: with f16 gradients that is an f32 copy of all
// of them at once, as Megatron-LM's f32 main-grad buffers are (the planner does not count these
// copies yet). The counts
// of Partial gradients are Partial, so completion adds one all-reduce of the summed count before
// update_loss_scaling, whose found_inf_out every update reads: one decision for all ranks.
// Under a pipeline the counts are summed per model chunk, so each stage sends one sum to the
// stage whose mesh holds the states (the first update's), which sends the decision back and the
// scale to the stage of the loss: completion inserts these sends like any cross-mesh reshard.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "ir/program.h"

namespace pdist::passes {

// Named as Paddle's amp keys; defaults are Paddle's.
struct LossScalingConfig {
  double init_loss_scaling = 32768.0;
  int64_t incr_every_n_steps = 1000;
  int64_t decr_every_n_nan_or_inf = 2;
  double incr_ratio = 2.0;
  double decr_ratio = 0.5;
};

// The states it adds, read back by the engine for the progress line.
inline constexpr char kLossScalingState[] = "amp.loss_scaling";
inline constexpr char kSkippedStepsState[] = "amp.skipped_steps";

struct LossScalingReport {
  int64_t updates = 0;  // optimizer ops that now skip on overflow
};

absl::StatusOr<LossScalingReport> ApplyLossScaling(ir::Program& program, const LossScalingConfig& config);

}  // namespace pdist::passes
