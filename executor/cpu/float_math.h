// Low-precision (bf16, f16) execution of the CPU kernels: every float kernel runs its f32 code on
// upcast inputs and its results are rounded to their declared types once.
//
//   %y = matmul(%x, %w) : bf16[8,64]
//     → x32 = f32(x), w32 = f32(w); matmul's f32 kernel → y32 : f32[8,64]; y = bf16(y32)
//
// Why not bf16 arithmetic: the hardware pdist targets does the same. Tensor-core GEMMs and
// attention accumulate bf16/f16 products in f32 and round the output; elementwise, norm and
// softmax kernels load low-precision values, compute in f32 and store low precision (PyTorch
// calls the f32 type of a bf16 op its "opmath" type). Rounding only at op boundaries is what makes
// a bf16 run on CPU a faithful stand-in for one on a GPU; bf16 sums of long rows would not be.
// The cost is conversion work, and collectives on CPU move the f32 copies (twice the bytes).
#pragma once

#include <string>

#include "executor/kernel.h"

namespace pdist::exec::cpu {

// `kernel` unchanged when no operand or result is bf16/f16; otherwise the kernel run as above.
KernelFn WithFloatMath(KernelFn kernel);

// Wraps every CPU kernel in `registry` except the ones that handle every dtype themselves
// (cast: it is the conversion).
void UseFloatMathForLowPrecision(KernelRegistry& registry);

}  // namespace pdist::exec::cpu
