// SplitMicroBatches: the forward program of one micro-batch, for gradient accumulation and
// pipeline schedules.
//
//   global batch 16, 4 micro-batches:
//     %0 = data "tokens" : i64[16,64]        →   %0 = data "tokens" : i64[4,64]
//     %7 = reshape(%6) {shape = [1024,128]}  →   %7 = reshape(%6) {shape = [256,128]}
//     loss %20 (mean)                        →   %21 = scale(%20) {scale = 0.25}; loss %21
//
// Which dims of which values come from the batch is found by the SPMD rules, as for data
// parallelism: the batch inputs are sharded on a mesh of `micro_batches` "ranks" and completion
// follows them through every op. An op that needs samples of other micro-batches (a reshard
// appears: batch statistics, a loss over the whole batch that is not a sum or a mean) makes the
// split fail, naming the op. The loss is scaled so that summing it — and every gradient — over
// the micro-batches gives the whole batch's value: 1/m for a mean, 1 for a sum. Without
// `average` (gradient_merge.avg = false) a mean loss is left unscaled: the step's gradient is the
// sum of the micro-batches' gradients, as Paddle's gradient merge without avg.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/program.h"

namespace pdist::passes {

struct MicroBatchProgram {
  ir::Program program;
  // Data inputs cut along dim 0 (the others, like the learning rate, are fed whole to each).
  std::vector<std::string> split_inputs;
  int64_t micro_batches = 1;
};

// The batch inputs (passes/batch_inputs.h) are cut into micro-batches, and with them every data
// input completion finds following the batch (its split_inputs). Errors: the batch not divisible by `micro_batches` (naming both), a program that already
// has DistAttrs or gradients, an op that mixes samples (above).
absl::StatusOr<MicroBatchProgram> SplitMicroBatches(const ir::Program& forward, int64_t micro_batches,
                                                    bool average = true);

}  // namespace pdist::passes
