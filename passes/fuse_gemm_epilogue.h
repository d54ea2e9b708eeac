// GEMM epilogues: a rank's `add(matmul(x, w), b)` with a bias b of one element per output column
// becomes `fused_gemm_epilogue(x, w, b)` (ir/ops/fused.cc), and a `gelu {approximate = true}` of
// such a sum joins it (`activation = "gelu"`), so that a GPU adds the bias and applies the GELU in
// cuBLASLt's epilogue while the product is still in registers, instead of writing the product,
// reading it back and writing the sum, and again for the GELU (Paddle's fuse_gemm_epilogue pass):
//
//   %3 = matmul(%x, %w) : bf16[8,32,96]                %4 = fused_gemm_epilogue(%x, %w, %b) : bf16[8,32,96]
//   %4 = add(%3, %b) : bf16[8,32,96]            →
//   %5, %6 = add_grad(%3, %b, %g)                       %5, %6 = add_grad(%4, %b, %g)
//
// A pair fuses where the product is read by nothing but the add — and by ops that read only its
// type (add_grad's x, OpDef::type_only_operands), which then read the sum's, the same type — the
// product is no program output, the matmul folds into one GEMM (w one matrix, x untransposed), and
// both run in one role and pipeline job. The fused op takes the add's place. A GELU joins where
// it is the tanh form (cuBLASLt's), in the same role and job, and every other reader of the sum
// (gelu_grad) comes after it: the fused op moves to the GELU's place and still makes the sum, its
// second result, for them. In the backward, a bias's `add_grad(z, b, g)` whose x_grad (g itself)
// only a `matmul_grad(x, w, ·)` of one GEMM reads becomes, with it, `fused_gemm_epilogue_grad(x, w,
// g)` at the matmul_grad's place: the bias gradient comes out of the weight gradient's GEMM, which
// reads g anyway (wherever the bias was added: the pair need not come from a fused forward).
// Run it on a rank's
// program (after partition) or on a single rank's; it changes no numbers on the CPU (its kernel
// runs matmul's and add's), and on a GPU rounds the sum once instead of the product and the sum.
#pragma once

#include <cstdint>

#include "ir/program.h"

namespace pdist::passes {

struct FuseGemmEpilogueReport {
  int64_t bias_adds = 0;  // matmul + add pairs made one fused_gemm_epilogue
  int64_t gelus = 0;      // of those, the ones whose GELU (tanh form) they took in too
  int64_t bias_grads = 0;  // add_grad + matmul_grad pairs made one fused_gemm_epilogue_grad
};

FuseGemmEpilogueReport FuseGemmEpilogues(ir::Program& program);

}  // namespace pdist::passes
