// The fixed token batch that calibration and the training benchmarks feed: the same every step,
// so step times are comparable across runs and layouts.
#pragma once

#include "executor/executor.h"
#include "ir/program.h"

namespace pdist::calibration {

// "tokens" and "labels" of `model` filled with (37 i + 11) mod 256.
inline exec::Feeds FixedTokenBatch(const ir::Program& model) {
  exec::Feeds feeds;
  for (const char* name : {"tokens", "labels"}) {
    exec::Tensor t = exec::Tensor::Empty(model.FindArgument(name)->type());
    for (int64_t i = 0; i < t.num_elements(); ++i) t.data<int64_t>()[i] = (i * 37 + 11) % 256;
    feeds[name] = t;
  }
  return feeds;
}

}  // namespace pdist::calibration
