// Running one op's kernel as part of another's: a fused or merged op's kernel that computes a
// share of its work with the registered kernel of the op it stands for (executor/cpu/fused_kernels.cc,
// the CUDA fused_gemm_epilogue_grad's fallback), so that the share's numbers are that kernel's.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "executor/kernel.h"
#include "ir/program.h"

namespace pdist::exec {

// Runs `kernel` on `inputs` as `op` (whose attributes and IR types it may read), placed as `ctx`
// (its allocator, stream, scratch list, communicators and micro-batch); its results, of `types`.
absl::StatusOr<std::vector<Tensor>> RunKernelAs(const KernelFn& kernel, const ir::Operation& op, KernelContext& ctx,
                                                std::vector<const Tensor*> inputs, std::vector<TensorType> types);

// An add_grad(x, bias, out_grad) op of out_grad's and bias's types, x's out_grad's: what add_grad's
// kernel needs of its op to hand out_grad back as x_grad (ir::OpDef::aliases_if_same_type) rather
// than copy it, when it computes only a bias's gradient for a fused op.
class BiasAddGradOp {
 public:
  BiasAddGradOp(const TensorType& out_grad, const TensorType& bias);
  const ir::Operation& op() const { return *op_; }

 private:
  ir::Program types_;  // owns the op's values
  std::unique_ptr<ir::Operation> op_;
};

}  // namespace pdist::exec
