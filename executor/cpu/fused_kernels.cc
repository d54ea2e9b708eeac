// CPU kernels of the fused ops (ir/ops/fused.cc): the kernels of the ops they fuse, run in turn
// on the same tensors (executor/sub_kernel.h), so that a fused program computes bit for bit what
// the unfused one does (bf16/f16 included: each of those kernels rounds its result, as unfused).
// The saving a fusion buys is the GPU's; on the CPU it exists so the fusing pass can be proven on
// every strategy.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "executor/cpu/cpu_kernels.h"
#include "executor/kernel.h"
#include "executor/sub_kernel.h"
#include "ir/program.h"
#include "ir/status.h"

namespace pdist::exec::cpu {
namespace {

using Kernels = std::map<std::string, KernelFn>;

// fused_gemm_epilogue(x, y, bias): matmul(x, y) (the fused op's trans_x, trans_y), then
// add(product, bias); with activation "gelu", gelu {approximate = true} of the sum, and the sum.
KernelFn FusedGemmEpilogue(const Kernels& k) {
  return [matmul = k.at("matmul"), add = k.at("add"), gelu = k.at("gelu")](KernelContext& ctx) -> absl::Status {
    const TensorType type = ctx.output_type(0);
    PDIST_ASSIGN_OR_RETURN(std::vector<Tensor> product,
                           RunKernelAs(matmul, ctx.op(), ctx, {ctx.input(0), ctx.input(1)}, {type}));
    PDIST_ASSIGN_OR_RETURN(std::vector<Tensor> sum, RunKernelAs(add, ctx.op(), ctx, {&product[0], ctx.input(2)}, {type}));
    if (ctx.num_outputs() == 1) {
      ctx.SetOutput(0, std::move(sum[0]));
      return absl::OkStatus();
    }
    const ir::Operation tanh_gelu("gelu", {}, {{"approximate", true}});
    PDIST_ASSIGN_OR_RETURN(std::vector<Tensor> activated, RunKernelAs(gelu, tanh_gelu, ctx, {&sum[0]}, {type}));
    ctx.SetOutput(0, std::move(activated[0]));
    ctx.SetOutput(1, std::move(sum[0]));
    return absl::OkStatus();
  };
}

// fused_gemm_epilogue_grad(x, y, out_grad): matmul_grad(x, y, out_grad), then the bias's
// gradient as add_grad computes it (its x_grad, out_grad itself, unused).
KernelFn FusedGemmEpilogueGrad(const Kernels& k) {
  return [matmul_grad = k.at("matmul_grad"), add_grad = k.at("add_grad")](KernelContext& ctx) -> absl::Status {
    const Tensor& out_grad = *ctx.input(2);
    PDIST_ASSIGN_OR_RETURN(std::vector<Tensor> xy, RunKernelAs(matmul_grad, ctx.op(), ctx,
                                                               {ctx.input(0), ctx.input(1), &out_grad},
                                                               {ctx.output_type(0), ctx.output_type(1)}));
    const BiasAddGradOp bias_grad(out_grad.type(), ctx.output_type(2));
    PDIST_ASSIGN_OR_RETURN(std::vector<Tensor> grads, RunKernelAs(add_grad, bias_grad.op(), ctx,
                                                                  {nullptr, nullptr, &out_grad},
                                                                  {out_grad.type(), ctx.output_type(2)}));
    ctx.SetOutput(0, std::move(xy[0]));
    ctx.SetOutput(1, std::move(xy[1]));
    ctx.SetOutput(2, std::move(grads[1]));
    return absl::OkStatus();
  };
}

}  // namespace

void RegisterFusedKernels(KernelRegistry& registry) {
  // Without all of them (a registration order changed), nothing is registered and
  // OpRegistryTest names the fused ops as ops without a CPU kernel.
  Kernels kernels;
  for (const char* type : {"matmul", "add", "gelu", "matmul_grad", "add_grad"}) {
    const KernelFn* kernel = registry.Find(DeviceType::kCPU, type);
    if (kernel == nullptr) return;
    kernels[type] = *kernel;
  }
  registry.Register(DeviceType::kCPU, "fused_gemm_epilogue", FusedGemmEpilogue(kernels));
  registry.Register(DeviceType::kCPU, "fused_gemm_epilogue_grad", FusedGemmEpilogueGrad(kernels));
}

}  // namespace pdist::exec::cpu
