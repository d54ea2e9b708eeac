// The batch of a program: which data inputs carry samples along dim 0, so that data parallelism
// and micro-batching cut those and leave the rest to completion.
//
//   %tokens: i64[8,16] {data_input}     ─┐ batch 8: dim 0 of the inputs of the highest rank
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

// The data inputs (of rank >= 1, the learning rate aside) whose dim 0 is the batch: dim 0 of
// the inputs of the highest rank (the samples: tokens [b, s] beside labels flattened to [b·s]
// and a mask [b·s]; images [b, c, h, w]), the one most of those share, the first one's on a
// tie. An input of dim 0 = 1 (a mask or table broadcast over the batch) is not a candidate unless
// every input is one. A vote over all inputs took the flattened labels and mask, or three
// per-feature vectors [16], for the batch.
absl::StatusOr<BatchInputs> FindBatchInputs(const ir::Program& program);

}  // namespace pdist::passes
