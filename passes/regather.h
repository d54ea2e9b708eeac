// RegatherInBackward: under sequence parallelism, keep the sequence shard of an activation for
// the backward and all-gather it again there, instead of keeping the gathered tensor — what
// Megatron-LM does with the input of each column-parallel matmul (Korthikanti et al. 2022, §4.2.2:
// the layer's activations 34·s·b·h/t bytes rather than with two whole s·b·h inputs).
//
//   forward                                          forward
//     %g = reshard(%ln)        [s] → whole             %g = reshard(%ln)
//     %c = cast(%g) {bf16}                             %c = cast(%g) {bf16}
//     %y = matmul(%c, %w)                      →        %y = matmul(%c, %w)
//   backward                                         backward
//     %dx, %dw = matmul_grad(%c, %w, %dy)              %g2 = reshard(%ln)          (role backward)
//                                                      %c2 = cast(%g2) {bf16}
//                                                      %dx, %dw = matmul_grad(%c2, %w, %dy)
//
// A forward value the backward reads is regathered when it is made from a forward activation
// by a reshard that only gathers (its source is sharded where its result is whole, nothing
// Partial) followed by nothing but casts. The chain is cloned once per model chunk, just before
// its first backward reader there, which with every later backward reader of that chunk reads
// the clone; the forward keeps the original. Run it after completion (the clones copy the
// completed DistAttrs) and before split-weight-grad (which gives a regather that only weight
// gradients read the W role).
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "ir/program.h"

namespace pdist::passes {

struct Regathered {
  int64_t values = 0;       // forward values the backward now regathers
  // Per micro-batch and rank: the gathered local bytes no longer kept, less the shards kept instead.
  int64_t bytes_saved = 0;
};

absl::StatusOr<Regathered> RegatherInBackward(ir::Program& program);

}  // namespace pdist::passes
