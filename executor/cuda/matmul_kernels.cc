// CUDA matmul and matmul_grad through cuBLASLt (executor/cuda/gemm.h), running the products of
// the shared plan (executor/matmul_plan.h) in the CPU's order: one GEMM for a folded batch, else
// one per output batch, summed into each destination in increasing batch order (beta = 1 after
// the first).
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "executor/cuda/cuda_backend.h"
#include "executor/cuda/cuda_kernels.h"
#include "executor/cuda/cuda_status.h"
#include "executor/cuda/elem_type.h"
#include "executor/cuda/gemm.h"
#include "executor/say_once.h"
#include "executor/cuda/strided_walk.h"
#include "executor/kernel.h"
#include "executor/matmul_plan.h"
#include "executor/sub_kernel.h"
#include "ir/status.h"

namespace pdist::exec::cuda {
namespace {

// The tensors of one op, by the plan's MatrixRef::Source.
struct Operands {
  const Tensor* x;
  const Tensor* y;
  const Tensor* g;
  int64_t element_size;
  const char* At(const MatrixRef& r) const {
    const Tensor* t = r.source == MatrixRef::kX ? x : r.source == MatrixRef::kY ? y : g;
    return static_cast<const char*>(t->raw()) + r.offset * element_size;
  }
};

GemmMatrix MatrixOf(const Operands& of, const MatrixRef& r) {
  return {.data = of.At(r), .rows = r.rows, .cols = r.cols, .ld = r.cols, .trans = r.trans};
}

// c = lhs·rhs, or c += lhs·rhs.
absl::Status Gemm(KernelContext& ctx, ElemType type, const Operands& of, const MatrixRef& lhs, const MatrixRef& rhs,
                  char* c, bool accumulate) {
  return RowMajorGemm(ctx, {.in = type,
                            .out = type,
                            .lhs = MatrixOf(of, lhs),
                            .rhs = MatrixOf(of, rhs),
                            .out_data = c,
                            .out_ld = rhs.product_cols(),
                            .beta = accumulate ? 1.0 : 0.0});
}

// Sums the products of `sources[d]` into destination d (zeros for none), each of `size` elements.
template <typename Factors>
absl::Status SumInto(KernelContext& ctx, ElemType type, const Operands& of, const std::vector<std::vector<int64_t>>& sources,
                     int64_t size, char* out, Factors factors) {
  for (size_t dst = 0; dst < sources.size(); ++dst) {
    char* c = out + static_cast<int64_t>(dst) * size * of.element_size;
    if (sources[dst].empty()) {
      PDIST_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(c, 0, static_cast<size_t>(size * of.element_size), StreamOf(ctx)));
    }
    for (size_t i = 0; i < sources[dst].size(); ++i) {
      const auto [lhs, rhs] = factors(sources[dst][i]);
      PDIST_RETURN_IF_ERROR(Gemm(ctx, type, of, lhs, rhs, c, i > 0));
    }
  }
  return absl::OkStatus();
}

absl::Status MatmulKernel(KernelContext& ctx) {
  PDIST_ASSIGN_OR_RETURN(MatmulPlan p, PlanMatmul(ctx));
  Tensor& out = ctx.AllocateOutput(0);
  PDIST_ASSIGN_OR_RETURN(ElemType type, ElemTypeOf("matmul", out.dtype()));
  const Operands of{ctx.input(0), ctx.input(1), nullptr, ir::DataTypeSize(out.dtype())};
  char* o = static_cast<char*>(out.raw());
  if (p.fold) {
    const auto [lhs, rhs] = p.Forward(0);
    return Gemm(ctx, type, of, lhs, rhs, o, false);
  }
  std::vector<int64_t> identity(static_cast<size_t>(p.batches));
  for (int64_t b = 0; b < p.batches; ++b) identity[b] = b;
  return SumInto(ctx, type, of, MatmulPlan::Sources(p.batches, identity), p.dims.m * p.dims.n, o,
                 [&](int64_t b) { return p.Forward(b); });
}

absl::Status MatmulGradKernel(KernelContext& ctx) {
  PDIST_ASSIGN_OR_RETURN(MatmulPlan p, PlanMatmul(ctx));
  Tensor& dx = ctx.AllocateOutput(0);
  Tensor& dy = ctx.AllocateOutput(1);
  PDIST_ASSIGN_OR_RETURN(ElemType type, ElemTypeOf("matmul_grad", dx.dtype()));
  const Operands of{ctx.input(0), ctx.input(1), ctx.input(2), ir::DataTypeSize(dx.dtype())};
  char* dxp = static_cast<char*>(dx.raw());
  char* dyp = static_cast<char*>(dy.raw());
  if (p.fold) {
    const auto [xa, xb] = p.XGrad(0);
    PDIST_RETURN_IF_ERROR(Gemm(ctx, type, of, xa, xb, dxp, false));
    const auto [ya, yb] = p.YGrad(0);
    return Gemm(ctx, type, of, ya, yb, dyp, false);
  }
  const auto& d = p.dims;
  PDIST_RETURN_IF_ERROR(SumInto(ctx, type, of, MatmulPlan::Sources(p.x_batches, p.x_of), d.m * d.k, dxp,
                                [&](int64_t b) { return p.XGrad(b); }));
  return SumInto(ctx, type, of, MatmulPlan::Sources(p.y_batches, p.y_of), d.k * d.n, dyp,
                 [&](int64_t b) { return p.YGrad(b); });
}

// (x, y, bias) → x·y + bias (ir/ops/fused.cc), or with activation "gelu" its GELU (tanh form) and
// the sum: one GEMM (the op folds x's rows), the bias and the GELU in cuBLASLt's epilogue. Where
// cuBLASLt has no such epilogue for the call (a type, a column count not a multiple of 8 for the
// GELU's kept input), the bias is copied to every row and the GEMM adds its product to it
// (beta = 1), then the GELU kernel runs: the same values, more passes over memory.
absl::Status FusedGemmEpilogueKernel(KernelContext& ctx) {
  PDIST_ASSIGN_OR_RETURN(MatmulPlan p, PlanMatmul(ctx));
  if (!p.fold) return absl::InternalError("fused_gemm_epilogue: the product does not fold into one GEMM");
  const bool gelu = ctx.num_outputs() == 2;
  Tensor& out = ctx.AllocateOutput(0);
  void* sum = gelu ? ctx.AllocateOutput(1).raw() : out.raw();
  PDIST_ASSIGN_OR_RETURN(ElemType type, ElemTypeOf("fused_gemm_epilogue", out.dtype()));
  const Operands of{ctx.input(0), ctx.input(1), nullptr, ir::DataTypeSize(out.dtype())};
  const auto [lhs, rhs] = p.Forward(0);
  const int64_t rows = lhs.product_rows(), cols = rhs.product_cols();
  auto apply_gelu = [&]() -> absl::Status {
    if (!gelu) return absl::OkStatus();
    return CudaStatus(LaunchUnary(UnaryOp::kGeluTanh, type, sum, out.raw(), rows * cols, StreamOf(ctx)),
                      "fused_gemm_epilogue's gelu");
  };
  auto bias_on_every_row = [&] {
    return StridedCopy(ctx, {rows, cols}, ctx.input(2)->raw(), {0, 1}, sum, {cols, 1}, of.element_size);
  };
  if (lhs.product_cols() == 0) {  // an empty product: the bias alone
    PDIST_RETURN_IF_ERROR(bias_on_every_row());
    return apply_gelu();
  }
  GemmCall call{.in = type, .out = type, .lhs = MatrixOf(of, lhs), .rhs = MatrixOf(of, rhs), .out_data = out.raw(),
                .out_ld = cols, .bias = ctx.input(2)->raw(), .gelu_input = gelu ? sum : nullptr};
  const absl::Status fused = RowMajorGemm(ctx, call);
  if (!absl::IsUnimplemented(fused)) {
    if (fused.ok()) SayOnce(absl::StrCat("fused_gemm_epilogue runs its bias", gelu ? " and GELU" : "", " in cuBLASLt's epilogue"));
    return fused;
  }
  SayOnce(absl::StrCat(fused.message(), "; the bias is added by the GEMM (beta = 1)", gelu ? ", then the GELU kernel" : ""));
  PDIST_RETURN_IF_ERROR(bias_on_every_row());
  call.out_data = sum;
  call.bias = nullptr;
  call.gelu_input = nullptr;
  call.beta = 1;
  PDIST_RETURN_IF_ERROR(RowMajorGemm(ctx, call));
  return apply_gelu();
}

// (x, y, out_grad) → matmul_grad's x_grad and y_grad, and the bias's gradient (out_grad's column
// sums) from the y_grad GEMM's epilogue, which reads out_grad anyway (ir/ops/fused.cc). Where
// cuBLASLt offers no bias-gradient epilogue for the call (or the sum is empty), the GEMM runs
// plain and the bias gradient is add_grad's own kernel's.
absl::Status FusedGemmEpilogueGradKernel(KernelContext& ctx) {
  PDIST_ASSIGN_OR_RETURN(MatmulPlan p, PlanMatmul(ctx));
  if (!p.fold) return absl::InternalError("fused_gemm_epilogue_grad: the product does not fold into one GEMM");
  Tensor& dx = ctx.AllocateOutput(0);
  Tensor& dy = ctx.AllocateOutput(1);
  Tensor& bias_grad = ctx.AllocateOutput(2);
  PDIST_ASSIGN_OR_RETURN(ElemType type, ElemTypeOf("fused_gemm_epilogue_grad", dx.dtype()));
  const Operands of{ctx.input(0), ctx.input(1), ctx.input(2), ir::DataTypeSize(dx.dtype())};
  const auto [xa, xb] = p.XGrad(0);
  PDIST_RETURN_IF_ERROR(Gemm(ctx, type, of, xa, xb, static_cast<char*>(dx.raw()), false));
  const auto [ya, yb] = p.YGrad(0);
  if (ya.source != MatrixRef::kG && yb.source != MatrixRef::kG) {
    return absl::InternalError("fused_gemm_epilogue_grad: out_grad is neither factor of y_grad");
  }
  GemmCall call{.in = type, .out = type, .lhs = MatrixOf(of, ya), .rhs = MatrixOf(of, yb), .out_data = dy.raw(),
                .out_ld = yb.product_cols(), .bias_grad = bias_grad.raw(), .bias_grad_of_rhs = yb.source == MatrixRef::kG};
  // An empty GEMM (no rows to sum, or no weight gradient to write) runs no epilogue: the fallback.
  if (ya.product_rows() > 0 && ya.product_cols() > 0 && yb.product_cols() > 0) {
    const absl::Status fused = RowMajorGemm(ctx, call);
    if (!absl::IsUnimplemented(fused)) {
      if (fused.ok()) SayOnce("fused_gemm_epilogue_grad takes the bias gradient from cuBLASLt's epilogue");
      return fused;
    }
    SayOnce(absl::StrCat(fused.message(), "; the bias gradient runs as add_grad"));
  }
  call.bias_grad = nullptr;
  PDIST_RETURN_IF_ERROR(RowMajorGemm(ctx, call));
  const KernelFn* add_grad = KernelRegistry::Global().Find(DeviceType::kCUDA, "add_grad");
  if (add_grad == nullptr) return absl::InternalError("fused_gemm_epilogue_grad: no CUDA add_grad kernel");
  const Tensor& out_grad = *ctx.input(2);
  const BiasAddGradOp op(out_grad.type(), bias_grad.type());
  PDIST_ASSIGN_OR_RETURN(std::vector<Tensor> grads,
                         RunKernelAs(*add_grad, op.op(), ctx, {nullptr, nullptr, &out_grad}, {out_grad.type(), bias_grad.type()}));
  ctx.SetOutput(2, std::move(grads[1]));
  return absl::OkStatus();
}

}  // namespace

void RegisterMatmulKernels(KernelRegistry& registry) {
  registry.Register(DeviceType::kCUDA, "matmul", MatmulKernel);
  registry.Register(DeviceType::kCUDA, "matmul_grad", MatmulGradKernel);
  registry.Register(DeviceType::kCUDA, "fused_gemm_epilogue", FusedGemmEpilogueKernel);
  registry.Register(DeviceType::kCUDA, "fused_gemm_epilogue_grad", FusedGemmEpilogueGradKernel);
}

}  // namespace pdist::exec::cuda
