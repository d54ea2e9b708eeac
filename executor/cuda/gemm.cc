// cuBLASLt behind RowMajorGemm (gemm.h).
//
// Row-major c[M,N] = op(a)·op(b) is cuBLASLt's column-major cᵀ = op(b)ᵀ·op(a)ᵀ: a row-major
// (rows, cols) matrix is a column-major (cols, rows) one with the same leading dimension, so
// the call swaps the factors and keeps each one's transpose flag.
#include "executor/cuda/gemm.h"

#include <cublasLt.h>

#include <map>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "executor/cuda/cuda_backend.h"
#include "executor/cuda/cuda_status.h"
#include "executor/cuda/elem_type.h"
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

cudaDataType CudaDataTypeOf(ElemType type) {
  switch (type) {
    case ElemType::kF64: return CUDA_R_64F;
    case ElemType::kBF16: return CUDA_R_16BF;
    case ElemType::kF16: return CUDA_R_16F;
    case ElemType::kF32: break;
  }
  return CUDA_R_32F;
}

// The largest power of two up to 256 that divides the address and every batch's offset: what
// cuBLASLt may assume of each batch's matrix.
uint32_t AlignmentOf(const void* p, int64_t batch_stride_bytes) {
  const auto bits = reinterpret_cast<uintptr_t>(p) | static_cast<uintptr_t>(batch_stride_bytes);
  uint32_t alignment = 256;
  while (alignment > 1 && bits % alignment != 0) alignment /= 2;
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

// A row-major (rows, cols) matrix with leading dimension ld, as cuBLASLt's column-major layout.
absl::Status Layout(cublasLtMatrixLayout_t* layout, cudaDataType type, int64_t rows, int64_t cols, int64_t ld,
                    int64_t batch, int64_t batch_stride) {
  PDIST_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(layout, type, static_cast<uint64_t>(cols),
                                                          static_cast<uint64_t>(rows), ld));
  if (batch > 1) {
    const int32_t count = static_cast<int32_t>(batch);
    PDIST_CUBLAS_RETURN_IF_ERROR(
        cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
    PDIST_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                                  &batch_stride, sizeof(batch_stride)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RowMajorGemm(KernelContext& ctx, const GemmCall& g) {
  const int64_t m = g.lhs.product_rows(), k = g.lhs.product_cols(), n = g.rhs.product_cols();
  if (g.rhs.product_rows() != k) {
    return absl::InternalError(absl::StrCat(ctx.op().type(), ": GEMM factors [", m, ",", k, "]·[", g.rhs.product_rows(),
                                            ",", n, "] do not chain"));
  }
  const cudaStream_t stream = StreamOf(ctx);
  if (m == 0 || n == 0 || g.batch == 0) return absl::OkStatus();
  if (k == 0) {  // an empty sum: zeros (or out unchanged), as the CPU's GEMM gives
    if (g.bias != nullptr || g.bias_grad != nullptr) {
      return absl::InternalError(absl::StrCat(ctx.op().type(), ": an epilogue on an empty product"));
    }
    if (g.beta != 0) return absl::OkStatus();
    for (int64_t b = 0; b < g.batch; ++b) {
      char* c = static_cast<char*>(g.out_data) + b * g.out_batch_stride * ElemTypeSize(g.out);
      PDIST_CUDA_RETURN_IF_ERROR(cudaMemset2DAsync(c, static_cast<size_t>(g.out_ld * ElemTypeSize(g.out)), 0,
                                                   static_cast<size_t>(n * ElemTypeSize(g.out)), static_cast<size_t>(m), stream));
    }
    return absl::OkStatus();
  }
  PDIST_ASSIGN_OR_RETURN(cublasLtHandle_t handle, HandleFor(ctx.device()));
  const bool f64 = g.in == ElemType::kF64;
  const cublasComputeType_t compute = f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
  const cudaDataType scale = f64 ? CUDA_R_64F : CUDA_R_32F;
  Descriptors d;
  PDIST_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescCreate(&d.op, compute, scale));
  // Column-major: A is rhs's storage, B is lhs's.
  const cublasOperation_t op_a = g.rhs.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = g.lhs.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  PDIST_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
  PDIST_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
  if (g.bias != nullptr) {
    if (g.batch != 1) return absl::InternalError(absl::StrCat(ctx.op().type(), ": a bias epilogue on ", g.batch, " GEMMs"));
    // Column-major D is the row-major product transposed: its rows are the product's N columns,
    // the length cuBLASLt's bias vector has. The bias has D's type (the default bias type); so
    // has the GELU's input, kept in D's layout (leading dimension N, which cuBLASLt wants a
    // multiple of 8).
    const cublasLtEpilogue_t epilogue = g.gelu_input != nullptr ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_BIAS;
    PDIST_CUBLAS_RETURN_IF_ERROR(
        cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
    PDIST_CUBLAS_RETURN_IF_ERROR(
        cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof(g.bias)));
    if (g.gelu_input != nullptr) {
      if (n % 8 != 0) {
        return absl::UnimplementedError(absl::StrCat(ctx.op().type(), ": cuBLASLt keeps a GELU's input only with a ",
                                                     "multiple of 8 columns, not ", n));
      }
      const int64_t aux_ld = g.out_ld;
      PDIST_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                                                  &g.gelu_input, sizeof(g.gelu_input)));
      PDIST_CUBLAS_RETURN_IF_ERROR(
          cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof(aux_ld)));
    }
  } else if (g.gelu_input != nullptr) {
    return absl::InternalError(absl::StrCat(ctx.op().type(), ": a GELU epilogue without a bias"));
  }
  if (g.bias_grad != nullptr) {
    if (g.batch != 1 || g.bias != nullptr) {
      return absl::InternalError(absl::StrCat(ctx.op().type(), ": a bias-gradient epilogue on ", g.batch,
                                              " GEMMs or with a bias"));
    }
    // Column-major A is rhs's storage, B is lhs's (above): the summed factor's letter.
    const cublasLtEpilogue_t epilogue = g.bias_grad_of_rhs ? CUBLASLT_EPILOGUE_BGRADA : CUBLASLT_EPILOGUE_BGRADB;
    PDIST_CUBLAS_RETURN_IF_ERROR(
        cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
    PDIST_CUBLAS_RETURN_IF_ERROR(
        cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias_grad, sizeof(g.bias_grad)));
  }
  const cudaDataType in = CudaDataTypeOf(g.in), out = CudaDataTypeOf(g.out);
  PDIST_RETURN_IF_ERROR(Layout(&d.a, in, g.rhs.rows, g.rhs.cols, g.rhs.ld, g.batch, g.rhs.batch_stride));
  PDIST_RETURN_IF_ERROR(Layout(&d.b, in, g.lhs.rows, g.lhs.cols, g.lhs.ld, g.batch, g.lhs.batch_stride));
  PDIST_RETURN_IF_ERROR(Layout(&d.c, out, m, n, g.out_ld, g.batch, g.out_batch_stride));
  PDIST_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&d.preference));
  const uint64_t workspace_bytes = kWorkspaceBytes;
  PDIST_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(
      d.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes, sizeof(workspace_bytes)));
  // Offsets into a tensor can leave a factor less aligned than a fresh allocation: say so, or
  // the heuristic may pick a kernel that needs more.
  const int64_t in_size = ElemTypeSize(g.in), out_size = ElemTypeSize(g.out);
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, AlignmentOf(g.rhs.data, g.rhs.batch_stride * in_size)},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, AlignmentOf(g.lhs.data, g.lhs.batch_stride * in_size)},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, AlignmentOf(g.out_data, g.out_batch_stride * out_size)},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, AlignmentOf(g.out_data, g.out_batch_stride * out_size)}};
  for (const auto& [attribute, alignment] : alignments) {
    PDIST_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(d.preference, attribute, &alignment, sizeof(alignment)));
  }
  cublasLtMatmulHeuristicResult_t heuristic = {};
  int found = 0;
  // No algorithm for the configuration comes back as found == 0 or as CUBLAS_STATUS_NOT_SUPPORTED
  // (the latter documented, and seen for bias epilogues): both are Unimplemented, which a caller
  // with another way to compute it may catch.
  const cublasStatus_t searched =
      cublasLtMatmulAlgoGetHeuristic(handle, d.op, d.a, d.b, d.c, d.c, d.preference, 1, &heuristic, &found);
  if (searched != CUBLAS_STATUS_NOT_SUPPORTED) PDIST_RETURN_IF_ERROR(CublasStatus(searched, "cublasLtMatmulAlgoGetHeuristic"));
  if (found == 0 || searched == CUBLAS_STATUS_NOT_SUPPORTED) {
    return absl::UnimplementedError(absl::StrCat("cuBLASLt has no algorithm for ", ctx.op().type(), " [", m, ",", k,
                                                 "]·[", k, ",", n, "] x ", g.batch, g.bias != nullptr ? " with a bias" : ""));
  }
  Allocator& allocator = ctx.allocator();
  void* workspace = allocator.Allocate(kWorkspaceBytes, ctx.stream());
  const double alpha64 = g.alpha, beta64 = g.beta;
  const float alpha32 = static_cast<float>(g.alpha), beta32 = static_cast<float>(g.beta);
  const absl::Status status = CublasStatus(
      cublasLtMatmul(handle, d.op, f64 ? static_cast<const void*>(&alpha64) : &alpha32, g.rhs.data, d.a, g.lhs.data,
                     d.b, f64 ? static_cast<const void*>(&beta64) : &beta32, g.out_data, d.c, g.out_data, d.c,
                     &heuristic.algo, workspace, kWorkspaceBytes, stream),
      "cublasLtMatmul");
  allocator.Free(workspace, kWorkspaceBytes, ctx.stream());  // stream-ordered: reused only after the GEMM
  return status;
}

}  // namespace pdist::exec::cuda
