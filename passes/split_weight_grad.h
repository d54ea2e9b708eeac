// SplitWeightGradients: the backward of a program split into what the previous stage waits for
// (B: gradients of activations) and what only the optimizer reads (W: weight gradients), for
// the zero-bubble schedules (ZBH1), which run W later to fill the pipeline's bubbles.
//
//   %5, %6 = matmul_grad(%x, %w, %dy)                   %5 = matmul(%dy, %w) {trans_y = true}       B
//                                             →         %7 = reshape(%x) {shape = [M,k]}            W
//                                                       %8 = reshape(%dy) {shape = [M,n]}           W
//                                                       %6 = matmul(%7, %8) {trans_x = true}        W
//
// Each matmul_grad of a 2-D weight (trans_x false) whose two gradients are both used becomes two
// products, as Paddle's and the zero-bubble paper's ZB schedules do; then every backward op that
// the gradients crossing a stage boundary do not need gets the role backward_weight (on the
// first stage, which sends nothing upstream, that is its whole backward). Run it after
// completion, so that the products communicate exactly what matmul_grad's rule chose (a split
// completed on its own would merge the input gradient's product first-wins from the activation
// gradient: under sequence parallelism it all-gathered the weights and left the weight gradients
// whole); a boundary's gradient is then a reshard to another stage's mesh.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "ir/program.h"

namespace pdist::passes {

struct WeightGradientSplit {
  int64_t matmuls_split = 0;
  int64_t weight_ops = 0;  // ops given the role backward_weight
};

absl::StatusOr<WeightGradientSplit> SplitWeightGradients(ir::Program& program);

}  // namespace pdist::passes
