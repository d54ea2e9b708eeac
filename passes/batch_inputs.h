// The batch of a program: which data inputs carry samples along dim 0, so that data parallelism
// and micro-batching cut those and leave the rest to completion.
//
//   %tokens: i64[8,16] {data_input}     ─┐ batch 8: the dim 0 most data inputs share
//   %labels: i64[8,16] {data_input}     ─┘
//   %class_weight: f32[5] {data_input}     not the batch: placed by completion from its uses
//
// A data input whose dim 0 is not the batch (per-class weights, a flattened [batch·seq] label
// vector) is not seeded as one: completion shards it where its uses say it follows the batch
// (the flattened labels, through the loss) and replicates it where they do not (the weights).
// Seeding every data input along dim 0 refused the weights ("dim 0 is not divisible by
// dp_degree") and cut the flattened labels without telling the feed splitter.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/program.h"

namespace pdist::passes {

struct BatchInputs {
  int64_t batch = 0;                // dim 0 of `inputs`
  std::vector<ir::Value*> inputs;   // in argument order
};

// The data inputs (of rank >= 1, the learning rate aside) whose dim 0 is the batch: the dim 0
// that most of them share, the first input's where several tie. InvalidArgument when there is
// no such input.
absl::StatusOr<BatchInputs> FindBatchInputs(const ir::Program& program);

}  // namespace pdist::passes
