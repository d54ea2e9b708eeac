// The GPT that the predicted-against-measured benchmarks run on 4 CPU ranks (memory_benchmark,
// plan_accuracy_benchmark): 4 layers of hidden 128, 4 heads, vocabulary 256, sequence 64, batch
// 16; with `bf16`, the whole model through amp o2 (docs/mixed_precision.md), as
// `pdist-export --dtype bf16` makes it.
#pragma once

#include <cstdio>
#include <string>

#include "ir/models/gpt.h"
#include "passes/amp.h"

namespace pdist::bench {

inline ir::Program MeasuredGpt(bool bf16) {
  ir::Program model = *ir::models::BuildGpt({.vocab = 256, .hidden = 128, .layers = 4, .heads = 4, .seq_len = 64, .batch = 16});
  if (bf16) {
    absl::Status s = passes::ApplyAmp(model, ir::DataType::kBFloat16, passes::AmpLevel::kO2).status();
    if (!s.ok()) std::fprintf(stderr, "amp: %s\n", std::string(s.message()).c_str());
  }
  return model;
}

}  // namespace pdist::bench
