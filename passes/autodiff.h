// Reverse-mode automatic differentiation on the program IR.
//
//   %5 = matmul(%0, %w)           %9 = full() {shape = [], value = 1.0}         // d loss
//   %6 = sum(%5)            →     %10 = sum_grad(%5, %9)                         // d %5
//   loss %6                       %11, %12 = matmul_grad(%0, %w, %10)            // d %w = %12
//                                 gradient %w <- %12
#pragma once

#include "absl/status/status.h"
#include "ir/program.h"

namespace pdist::passes {

// Appends the backward ops of every op on a path from a trainable floating-point parameter to
// `loss` (a scalar), in reverse program order, using each op's registered gradient builder.
// Gradients of a value used more than once are summed with `add`, in a fixed order (the order
// of the uses, last first). Records each parameter's gradient in program.gradients(); a
// trainable parameter that does not reach the loss gets no gradient (and no entry).
// Fails if the program already has gradients, or if a gradient's type differs from its value's.
absl::Status AppendBackward(ir::Program& program, ir::Value* loss);

// The op that seeds the backward, d loss / d loss: the `full() {value = 1.0}` of the loss's type
// that AppendBackward makes first. Null when the program has none (no backward yet). Dynamic
// loss scaling (passes/loss_scaling.h) replaces it with the loss scale.
ir::Operation* LossSeedOf(const ir::Program& program);

}  // namespace pdist::passes
