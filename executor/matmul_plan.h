// The products a matmul or matmul_grad op runs, for every backend: which stored matrices (of x,
// y or out_grad, row-major, possibly read transposed) each output batch multiplies, and where
// each product is summed. The CPU runs them with Eigen (executor/cpu/matmul_kernels.cc), the GPU
// with cuBLASLt (executor/cuda/matmul_kernels.cc), in the same order.
//
// With G = out_grad and op(x)·op(y) = out:
//   x_grad = G·op(y)ᵀ          (trans_x: op(y)·Gᵀ)
//   y_grad = op(x)ᵀ·G          (trans_y: Gᵀ·op(x))
// each summed over the output batches that broadcast the operand, in increasing batch order.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "executor/kernel.h"
#include "ir/ops/matmul.h"

namespace pdist::exec {

// A row-major matrix stored at `offset` elements into one operand's data, read transposed or not.
struct MatrixRef {
  enum Source : int8_t { kX, kY, kG } source = kX;
  int64_t offset = 0;
  int64_t rows = 0, cols = 0;  // as stored
  bool trans = false;
  int64_t product_rows() const { return trans ? cols : rows; }
  int64_t product_cols() const { return trans ? rows : cols; }
};

struct MatmulPlan {
  ir::ops::MatmulDims dims;
  int64_t batches = 1;                   // output batches
  int64_t x_batches = 1, y_batches = 1;  // operand batches
  std::vector<int64_t> x_of, y_of;       // operand batch read by each output batch
  // A single y matrix and an un-transposed, un-broadcast x: the batch folds into m and the whole
  // op is one GEMM ([B·m,k]·[k,n], the usual activations·weight); batch 0 stands for all.
  bool fold = false;

  MatrixRef X(int64_t b, bool trans) const;
  MatrixRef Y(int64_t b, bool trans) const;
  MatrixRef G(int64_t b, bool trans) const;
  // The factors of output batch b's product: out[b] = first·second.
  std::pair<MatrixRef, MatrixRef> Forward(int64_t b) const;
  // The factors of output batch b's share of x_grad[x_of[b]] and of y_grad[y_of[b]].
  std::pair<MatrixRef, MatrixRef> XGrad(int64_t b) const;
  std::pair<MatrixRef, MatrixRef> YGrad(int64_t b) const;
  // For each destination matrix (operand batch), the output batches summed into it, in order.
  static std::vector<std::vector<int64_t>> Sources(int64_t destinations, const std::vector<int64_t>& destination_of);
};

absl::StatusOr<MatmulPlan> PlanMatmul(const KernelContext& ctx);

}  // namespace pdist::exec
