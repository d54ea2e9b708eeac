// CPU kernels of the fused ops (ir/ops/fused.cc): the kernels of the ops they fuse, run in turn
// on the same tensors, so that a fused program computes bit for bit what the unfused one does
// (bf16/f16 included: each of those kernels rounds its result, as unfused). The saving a fusion
// buys is the GPU's; on the CPU it exists so the fusing pass can be proven on every strategy.
#include <utility>
#include <vector>

#include "executor/cpu/cpu_kernels.h"
#include "executor/kernel.h"
#include "ir/status.h"

namespace pdist::exec::cpu {
namespace {

// Runs `kernel` on `inputs` within `ctx`'s op, placement and attributes; its one result, of `type`.
absl::StatusOr<Tensor> RunOne(const KernelFn& kernel, KernelContext& ctx, std::vector<const Tensor*> inputs,
                              const TensorType& type) {
  std::vector<Tensor> results(1);
  KernelContext one(ctx.op(), std::move(inputs), &results);
  one.OverrideOutputTypes({type});
  one.set_placement(ctx.allocator(), ctx.stream());
  PDIST_RETURN_IF_ERROR(kernel(one));
  return std::move(results[0]);
}

// fused_gemm_epilogue(x, y, bias): matmul(x, y), then add(product, bias).
KernelFn FusedGemmEpilogue(KernelFn matmul, KernelFn add) {
  return [matmul = std::move(matmul), add = std::move(add)](KernelContext& ctx) -> absl::Status {
    const TensorType type = ctx.output_type(0);
    PDIST_ASSIGN_OR_RETURN(Tensor product, RunOne(matmul, ctx, {ctx.input(0), ctx.input(1)}, type));
    PDIST_ASSIGN_OR_RETURN(Tensor sum, RunOne(add, ctx, {&product, ctx.input(2)}, type));
    ctx.SetOutput(0, std::move(sum));
    return absl::OkStatus();
  };
}

}  // namespace

void RegisterFusedKernels(KernelRegistry& registry) {
  // Without both (a registration order changed), nothing is registered and OpRegistryTest names
  // fused_gemm_epilogue as an op without a CPU kernel.
  const KernelFn* matmul = registry.Find(DeviceType::kCPU, "matmul");
  const KernelFn* add = registry.Find(DeviceType::kCPU, "add");
  if (matmul != nullptr && add != nullptr) {
    registry.Register(DeviceType::kCPU, "fused_gemm_epilogue", FusedGemmEpilogue(*matmul, *add));
  }
}

}  // namespace pdist::exec::cpu
