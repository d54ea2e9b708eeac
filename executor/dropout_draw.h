// What a dropout kernel needs from its op, on any backend: the multiplier of a kept element,
// the random stream's key, the keep threshold and the number of the first element drawn. The
// CPU and CUDA kernels both read it from here and decide each element with DropoutKeeps
// (executor/random.h), so their masks are identical.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "executor/kernel.h"

namespace pdist::exec {

// What a kept element is multiplied by, in dropout and in dropout_grad alike: 1/(1-p) when
// training in upscale_in_train mode (0 when p = 1: every element is dropped), 1-p at test time in
// downgrade_in_infer mode, 1 otherwise.
absl::StatusOr<double> DropoutFactor(const ir::AttributeMap& attrs);

struct DropoutDrawPlan {
  double factor = 1;
  uint64_t key = 0;
  uint64_t threshold = 0;  // p · 2^53; 0 at test time (every element kept)
  // Micro-batch k of a pipelined step is rows [k·n, (k+1)·n) of the whole batch: its elements
  // draw the numbers those rows draw in a whole-batch run (n: the whole tensor's element count).
  uint64_t first = 0;
  // c_dropout: the input is the piece at `offsets` of a tensor of `global_shape`, and element i
  // draws the number of its position there. Empty for dropout.
  std::vector<int64_t> global_shape, offsets;
};

// `seed_operand`: the value of the op's seed operand when it has one (the caller reads it from
// wherever the tensor lives); otherwise the `seed` attribute is the seed.
absl::StatusOr<DropoutDrawPlan> PlanDropoutDraw(const KernelContext& ctx, std::optional<int64_t> seed_operand);

}  // namespace pdist::exec
