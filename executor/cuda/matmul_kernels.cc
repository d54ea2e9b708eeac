// CUDA matmul and matmul_grad through cuBLASLt, running the products of the shared plan
// (executor/matmul_plan.h) in the CPU's order: one GEMM for a folded batch, else one per output
// batch, summed into each destination in increasing batch order (beta = 1 after the first).
//
// Row-major c[M,N] = op(a)·op(b) is cuBLASLt's column-major cᵀ = op(b)ᵀ·op(a)ᵀ: a row-major
// (rows, cols) matrix is a column-major (cols, rows) one with the same leading dimension, so
// the call swaps the factors and keeps each one's transpose flag. f32, bf16 and f16 compute in
// f32 (CUBLAS_COMPUTE_32F: no TF32, so f32 agrees with the CPU to rounding); f64 in f64.
#include <cublasLt.h>

#include <cstdint>
#include <map>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "executor/cuda/cuda_backend.h"
#include "executor/cuda/cuda_kernels.h"
#include "executor/cuda/cuda_status.h"
#include "executor/cuda/elem_type.h"
#include "executor/kernel.h"
#include "executor/matmul_plan.h"
#include "ir/status.h"

namespace pdist::exec::cuda {
namespace {

// Hopper's recommended cuBLASLt workspace; drawn from the stream-ordered pool per call.
constexpr int64_t kWorkspaceBytes = 32 << 20;

absl::Status CublasStatus(cublasStatus_t status, const char* call) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(call, ": ", cublasLtGetStatusName(status), ": ", cublasLtGetStatusString(status)));
}

#define PDIST_CUBLAS_RETURN_IF_ERROR(call) PDIST_RETURN_IF_ERROR(CublasStatus((call), #call))

absl::StatusOr<cublasLtHandle_t> HandleFor(const Device& device) {
  static std::mutex mu;
  static std::map<int, cublasLtHandle_t>* handles = new std::map<int, cublasLtHandle_t>();  // for the process's life
  std::lock_guard<std::mutex> lock(mu);
  auto it = handles->find(device.index);
  if (it != handles->end()) return it->second;
  cublasLtHandle_t handle = nullptr;
  PDIST_CUBLAS_RETURN_IF_ERROR(cublasLtCreate(&handle));
  (*handles)[device.index] = handle;
  return handle;
}

struct Types {
  cudaDataType data;
  cublasComputeType_t compute;
  cudaDataType scale;
};

Types TypesOf(ElemType type) {
  switch (type) {
    case ElemType::kF64: return {CUDA_R_64F, CUBLAS_COMPUTE_64F, CUDA_R_64F};
    case ElemType::kBF16: return {CUDA_R_16BF, CUBLAS_COMPUTE_32F, CUDA_R_32F};
    case ElemType::kF16: return {CUDA_R_16F, CUBLAS_COMPUTE_32F, CUDA_R_32F};
    case ElemType::kF32: break;
  }
  return {CUDA_R_32F, CUBLAS_COMPUTE_32F, CUDA_R_32F};
}

// The largest power of two up to 256 that divides the address: what cuBLASLt may assume.
uint32_t AlignmentOf(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

// Owns the cuBLASLt descriptors of one call.
struct Descriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  ~Descriptors() {
    if (preference != nullptr) cublasLtMatmulPreferenceDestroy(preference);
    if (c != nullptr) cublasLtMatrixLayoutDestroy(c);
    if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
    if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
    if (op != nullptr) cublasLtMatmulDescDestroy(op);
  }
};

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

// c = lhs·rhs, or c += lhs·rhs.
absl::Status Gemm(KernelContext& ctx, ElemType type, const Operands& of, const MatrixRef& lhs, const MatrixRef& rhs,
                  char* c, bool accumulate) {
  const int64_t m = lhs.product_rows(), k = lhs.product_cols(), n = rhs.product_cols();
  const cudaStream_t stream = StreamOf(ctx);
  if (m == 0 || n == 0) return absl::OkStatus();
  if (k == 0) {  // an empty sum: zeros, as the CPU's GEMM gives
    if (!accumulate) PDIST_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(c, 0, static_cast<size_t>(m * n * of.element_size), stream));
    return absl::OkStatus();
  }
  PDIST_ASSIGN_OR_RETURN(cublasLtHandle_t handle, HandleFor(ctx.device()));
  const Types t = TypesOf(type);
  Descriptors d;
  PDIST_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescCreate(&d.op, t.compute, t.scale));
  // Column-major: A is rhs's storage, B is lhs's.
  const cublasOperation_t op_a = rhs.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = lhs.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  PDIST_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
  PDIST_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
  PDIST_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&d.a, t.data, rhs.cols, rhs.rows, rhs.cols));
  PDIST_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&d.b, t.data, lhs.cols, lhs.rows, lhs.cols));
  PDIST_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&d.c, t.data, n, m, n));
  const char* a = of.At(rhs);
  const char* b = of.At(lhs);
  PDIST_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&d.preference));
  const uint64_t workspace_bytes = kWorkspaceBytes;
  PDIST_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(
      d.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes, sizeof(workspace_bytes)));
  // Batch offsets can leave a factor less aligned than a fresh allocation: say so, or the
  // heuristic may pick a kernel that needs more.
  const std::pair<cublasLtMatmulPreferenceAttributes_t, const void*> alignments[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, c},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, c}};
  for (const auto& [attribute, pointer] : alignments) {
    const uint32_t alignment = AlignmentOf(pointer);
    PDIST_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(d.preference, attribute, &alignment, sizeof(alignment)));
  }
  cublasLtMatmulHeuristicResult_t heuristic = {};
  int found = 0;
  PDIST_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatmulAlgoGetHeuristic(handle, d.op, d.a, d.b, d.c, d.c, d.preference, 1, &heuristic, &found));
  if (found == 0) {
    return absl::UnimplementedError(absl::StrCat("cuBLASLt has no algorithm for ", ctx.op().type(), " [", m, ",", k,
                                                 "]·[", k, ",", n, "]"));
  }
  Allocator& allocator = ctx.allocator();
  void* workspace = allocator.Allocate(kWorkspaceBytes, ctx.stream());
  const double alpha64 = 1, beta64 = accumulate ? 1 : 0;
  const float alpha32 = 1, beta32 = accumulate ? 1 : 0;
  const bool f64 = type == ElemType::kF64;
  const absl::Status status = CublasStatus(
      cublasLtMatmul(handle, d.op, f64 ? static_cast<const void*>(&alpha64) : &alpha32, a, d.a, b, d.b,
                     f64 ? static_cast<const void*>(&beta64) : &beta32, c, d.c, c, d.c, &heuristic.algo, workspace,
                     kWorkspaceBytes, stream),
      "cublasLtMatmul");
  allocator.Free(workspace, kWorkspaceBytes, ctx.stream());  // stream-ordered: reused only after the GEMM
  return status;
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

}  // namespace

void RegisterMatmulKernels(KernelRegistry& registry) {
  registry.Register(DeviceType::kCUDA, "matmul", MatmulKernel);
  registry.Register(DeviceType::kCUDA, "matmul_grad", MatmulGradKernel);
}

}  // namespace pdist::exec::cuda
