// SumStageGradientsOncePerStep: a parameter read on several pipeline stages (a tied embedding:
// the token table on the first stage and the output head on the last) gets one gradient share
// per stage; the shares meet on the parameter's stage once per step, in the optimizer job, not
// once per micro-batch in the backward.
//
//   before (stage 0 holds %wte; the head on stage 1 reads a copy)
//     %387 = …matmul_grad(…, %375, …)              @backward.1   (stage 1: the head's share)
//     %388 = reshard(%387)  stage 1 → stage 0      @backward.1   (per micro-batch)
//     %537 = embedding_grad(%0, %wte, %535)        @backward     (stage 0's share)
//     %538 = add(%388, %537)                       @backward
//     gradient %wte <- %538
//   after
//     %388 = reshard(%387)                         @optimizer    (sends the head's sum over micro-batches)
//     %538 = add(%388, %537)                       @optimizer
//
// Why: under NCCL a channel between two ranks matches sends and receives in issue order. The
// head's share leaves in the last stage's backward job, but stage 0 reads it in its own
// backward, which under an interleaved schedule runs after other messages on the same channel
// (rank 1 sends share, activation gradient; rank 0 receives activation gradient, share): the
// step hangs. In the optimizer job it follows every micro-batch's messages on both ranks. It is
// also one message per step instead of one per micro-batch, as Megatron-LM all-reduces the
// embedding's gradient once after the pipeline flush. The sums are linear, so the executor's
// sums over micro-batches (of each share) give the same gradient.
//
// Moved: the add ops whose result is a parameter's gradient (and the adds that feed them) when
// one of their operands comes by a move between meshes, and those moves; only when every other
// reader of what they make is an optimizer op. Run after completion (it inserts the moves).
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "ir/program.h"

namespace pdist::passes {

// Returns how many parameters' gradient sums it moved to the optimizer job.
absl::StatusOr<int64_t> SumStageGradientsOncePerStep(ir::Program& program);

}  // namespace pdist::passes
