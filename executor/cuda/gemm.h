// Row-major GEMMs through cuBLASLt, for every CUDA kernel that multiplies matrices (matmul and
// its gradient, attention's scores and products):
//
//   out[b] = alpha · op(lhs[b]) · op(rhs[b]) + beta · out[b] (+ bias on every row),   b < batch
//
// Each matrix is row-major with its own leading dimension (elements between rows), so a head of
// a [batch, seq, heads, dim] activation is a matrix without a copy (ld = heads · dim). Inputs of
// type `in` compute in f32 (f64 for f64; CUBLAS_COMPUTE_32F, no TF32: f32 agrees with the CPU to
// rounding); `out` is `in` or, for bf16/f16 factors, f32 (attention's scores stay in f32).
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "executor/cuda/launch.h"
#include "executor/kernel.h"

namespace pdist::exec::cuda {

struct GemmMatrix {
  const void* data = nullptr;
  int64_t rows = 0, cols = 0;  // as stored
  int64_t ld = 0;              // elements from one row to the next (≥ cols)
  bool trans = false;          // multiplied as its transpose
  int64_t batch_stride = 0;    // elements from one batch's matrix to the next (0: shared)
  int64_t product_rows() const { return trans ? cols : rows; }
  int64_t product_cols() const { return trans ? rows : cols; }
};

struct GemmCall {
  ElemType in = ElemType::kF32;   // lhs and rhs
  ElemType out = ElemType::kF32;  // `in`, or kF32 for bf16/f16 factors
  GemmMatrix lhs, rhs;
  void* out_data = nullptr;
  int64_t out_ld = 0, out_batch_stride = 0;
  int64_t batch = 1;
  double alpha = 1, beta = 0;
  // A vector of `out`'s type and length N (the product's columns) added to every row in the
  // GEMM's epilogue (CUBLASLT_EPILOGUE_BIAS), or null. One matrix only (batch 1).
  const void* bias = nullptr;
  // With a bias: where to write the sum, out receiving its GELU (tanh form) instead
  // (CUBLASLT_EPILOGUE_GELU_AUX_BIAS; the product's columns a multiple of 8), or null.
  void* gelu_input = nullptr;
  // A vector of out's type receiving the column sums of the factor that is out_grad — rhs
  // (CUBLASLT_EPILOGUE_BGRADA: the column-major A) or lhs (BGRADB) — over the GEMM's reduced
  // dimension: a bias's gradient out of the weight gradient's GEMM. Null: none. Not with `bias`.
  void* bias_grad = nullptr;
  bool bias_grad_of_rhs = true;
};

// Runs `call` on the kernel's stream; the cuBLASLt workspace comes from its allocator.
// Unimplemented when cuBLASLt has no algorithm for it (the caller may fall back).
absl::Status RowMajorGemm(KernelContext& ctx, const GemmCall& call);

}  // namespace pdist::exec::cuda
