// matmul's shape rule, shared by the op definition (ir/ops/matmul.cc) and the CPU kernels.
//
//   x f32[2,1,3,4] · y f32[5,4,2]  →  batch [2,5], m 3, k 4, n 2, out f32[2,5,3,2]
//   x f32[4] · y f32[4,2]          →  x is the row [1,4]; out f32[2] (m dropped)
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "ir/types.h"

namespace pdist::ir::ops {

// matmul(x, y) seen as a batch of matrix products out_b = op(x_b) · op(y_b), with op(x) [m,k]
// and op(y) [k,n]. Each operand is stored as row-major matrices (x: [m,k], or [k,m] when
// transposed). Like Paddle (and numpy), a 1-D x of size k is the row [1,k] and a 1-D y the
// column [k,1], their trans flag is ignored, and the promoted dim is dropped from out.
struct MatmulDims {
  Shape x_batch;  // x.shape[:-2] ([] for 1-D or 2-D x)
  Shape y_batch;
  Shape batch;  // numpy broadcast of x_batch and y_batch
  int64_t m = 1, k = 1, n = 1;
  bool trans_x = false;  // effective flags: false for a 1-D operand
  bool trans_y = false;
  Shape out;  // batch + [m] unless x is 1-D + [n] unless y is 1-D
};

// Errors (InvalidArgument) name the operand shapes: a 0-D operand, contraction dims that differ,
// batch dims that do not broadcast.
absl::StatusOr<MatmulDims> InferMatmulDims(const Shape& x, const Shape& y, bool trans_x, bool trans_y);

// Whether x·y is one GEMM over x's folded rows: x untransposed of rank >= 2, y one matrix — what
// the fused GEMM-epilogue ops take (ir/ops/fused.cc) and their pass looks for.
inline bool FoldsIntoOneGemm(const Shape& x, const Shape& y, bool trans_x) {
  return x.size() >= 2 && y.size() == 2 && !trans_x;
}

}  // namespace pdist::ir::ops
