// Host side of the CUDA flash_attn and flash_attn_grad (device side: attention_launch.cu): the
// CPU kernel's semantics (grouped kv heads, bottom-right causal mask, additive mask, no dropout
// in training), computed as cuBLASLt GEMMs per (batch, head) around two row kernels:
//
//   forward   S = q·kᵀ (f32)   P = exp(scale·S + mask − lse)   out = P·v
//   backward  S, P again from q, k and the saved lse            dv = Pᵀ·dO    dP = dO·vᵀ
//             dS = P ∘ (dP − rowsum(dO ∘ out))                  dq = scale·dS·k   dk = scale·dSᵀ·q
//
// Nothing of size seq² outlives the op: the backward recomputes S and P from the saved lse, as
// FlashAttention does, and the batch is taken in chunks whose scores fit
// kMaxAttentionScoreElements (launch.h). P and dS are rounded to the storage type before their
// GEMMs (bf16 where the inputs are bf16, as FlashAttention-2 rounds them): the tensor cores then
// run every product. This is not yet FlashAttention-2's fused tiling (the scores make a round
// trip through memory, and a causal mask's zeros are multiplied); docs/gpu.md says what it costs.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "executor/cuda/attention_choice.h"
#include "executor/cuda/cuda_backend.h"
#include "executor/cuda/cuda_kernels.h"
#include "executor/cuda/cuda_status.h"
#include "executor/cuda/elem_type.h"
#include "executor/cuda/gemm.h"
#include "executor/cuda/launch.h"
#include "executor/say_once.h"
#include "executor/kernel.h"
#include "ir/status.h"
#if PDIST_HAVE_CUDNN
#include "executor/cuda/cudnn/cudnn_attention.h"
#endif

namespace pdist::exec::cuda {
namespace {

absl::Status CheckNoDropout(const KernelContext& ctx, bool is_test) {
  PDIST_ASSIGN_OR_RETURN(double dropout, ir::GetDouble(ctx.attrs(), "dropout"));
  if (dropout > 0 && !is_test) {
    return absl::UnimplementedError(absl::StrCat(ctx.op().type(), ": attention dropout (", dropout,
                                                 ") is not implemented on cuda; use dropout = 0 or is_test"));
  }
  return absl::OkStatus();
}

#if PDIST_HAVE_CUDNN
constexpr bool kCudnnBuilt = true;
#else
constexpr bool kCudnnBuilt = false;
#endif

// The form this op runs in (executor/cuda/attention_choice.h), and whether cuDNN was insisted on.
struct Form {
  AttentionForm form;
  bool insist;
};

// Called after CheckNoDropout, which refuses training dropout on this backend: no dropout here.
absl::StatusOr<Form> FormOf(const KernelContext& ctx, ElemType type, const Tensor* mask, bool return_softmax,
                            bool causal) {
  const Tensor& q = *ctx.input(0);
  const AttentionCase c{.low_precision = type == ElemType::kBF16 || type == ElemType::kF16,
                        .dropout = false,
                        .mask = mask != nullptr && mask->defined(),
                        .return_softmax = return_softmax,
                        .head_dim = q.shape()[3],
                        .v_dim = ctx.input(2)->shape()[3],
                        .causal = causal,
                        .seq_q = q.shape()[1],
                        .seq_k = ctx.input(1)->shape()[1]};
  const char* env = std::getenv(kAttentionEnv);
  const std::string requested = env != nullptr ? env : "";
  const AttentionChoice choice = ChooseAttention(c, requested, kCudnnBuilt);
  if (!choice.error.empty()) return absl::FailedPreconditionError(absl::StrCat(ctx.op().type(), ": ", choice.error));
  return Form{choice.form, requested == "cudnn"};
}

// Runs `fused` (cuDNN) where the form says so: true when it ran, false when the GEMM form is to
// run instead — cuDNN cannot run this case here and was not insisted on (said once).
template <typename Fn>
absl::StatusOr<bool> RanFused(const KernelContext& ctx, const Form& form, Fn&& fused) {
  if (form.form != AttentionForm::kCudnn) return false;
  absl::Status status = fused();
  if (status.ok()) {
    SayOnce(absl::StrCat(ctx.op().type(), " runs on cuDNN's fused attention"));
    return true;
  }
  if (!absl::IsUnavailable(status) || form.insist) return status;
  SayOnce(absl::StrCat(status.message(), "; ", ctx.op().type(), " runs as GEMMs"));
  return false;
}

absl::StatusOr<AttentionShape> ShapeOf(const KernelContext& ctx, const Tensor* mask) {
  const Tensor& q = *ctx.input(0);
  const Tensor& k = *ctx.input(1);
  const Tensor& v = *ctx.input(2);
  AttentionShape a;
  a.batch = q.shape()[0];
  a.seq_q = q.shape()[1];
  a.heads_q = q.shape()[2];
  a.head_dim = q.shape()[3];
  a.seq_k = k.shape()[1];
  a.heads_k = k.shape()[2];
  a.v_dim = v.shape()[3];
  PDIST_ASSIGN_OR_RETURN(a.causal, ir::GetBool(ctx.attrs(), "causal"));
  a.scale = 1.0 / std::sqrt(static_cast<double>(a.head_dim));
  if (mask != nullptr && mask->defined()) {
    a.mask = mask->raw();
    a.mask_batch = mask->shape()[0];
    a.mask_heads = mask->shape()[1];
  }
  return a;
}

// The compute type of scores: f64 for f64, else f32.
ElemType ScoreType(ElemType type) { return type == ElemType::kF64 ? ElemType::kF64 : ElemType::kF32; }

// One operand of the per-head products: head h of batch element b is the row-major (rows, cols)
// matrix at data + b·batch_stride + h·head_stride elements, h being the query head or, where
// `kv_head`, its group's kv head. Chunk buffers count b from the chunk's first element.
struct HeadOperand {
  const void* data;
  ElemType type;
  int64_t batch_stride, head_stride;
  int64_t rows, cols, ld;
  bool kv_head = false;
  bool chunk_local = false;
  bool trans = false;

  HeadOperand T() const {
    HeadOperand t = *this;
    t.trans = !t.trans;
    return t;
  }
  GemmMatrix At(const AttentionShape& a, int64_t b, int64_t b0, int64_t h) const {
    const int64_t head = kv_head ? h / (a.heads_q / a.heads_k) : h;
    const int64_t offset = (chunk_local ? b - b0 : b) * batch_stride + head * head_stride;
    return {.data = static_cast<const char*>(data) + offset * ElemTypeSize(type),
            .rows = rows,
            .cols = cols,
            .ld = ld,
            .trans = trans,
            .batch_stride = head_stride};
  }
};

// out[b, h] = alpha · op(lhs[b, h]) · op(rhs[b, h]) for every head of the chunk's batch elements.
// Without grouping the heads of a batch element are one batched GEMM; with it, a GEMM per query
// head, and a kv-head output sums its group's heads in order.
absl::Status PerHeadGemm(KernelContext& ctx, const AttentionShape& a, int64_t b0, int64_t batches, const HeadOperand& lhs,
                         const HeadOperand& rhs, const HeadOperand& out, double alpha) {
  const int64_t group = a.heads_q / a.heads_k;
  for (int64_t b = b0; b < b0 + batches; ++b) {
    for (int64_t h = 0; h < a.heads_q; h += group == 1 ? a.heads_q : 1) {
      const GemmMatrix o = out.At(a, b, b0, h);
      PDIST_RETURN_IF_ERROR(RowMajorGemm(ctx, {.in = lhs.type,
                                               .out = out.type,
                                               .lhs = lhs.At(a, b, b0, h),
                                               .rhs = rhs.At(a, b, b0, h),
                                               .out_data = const_cast<void*>(o.data),
                                               .out_ld = o.ld,
                                               .out_batch_stride = o.batch_stride,
                                               .batch = group == 1 ? a.heads_q : 1,
                                               .alpha = alpha,
                                               .beta = out.kv_head && h % group != 0 ? 1.0 : 0.0}));
    }
  }
  return absl::OkStatus();
}

// The operands of one op: q, k, v and out-shaped tensors as heads, and the chunk's buffers.
struct Operands {
  const AttentionShape& a;
  ElemType type;
  HeadOperand Q(const void* data) const {
    return {data, type, a.seq_q * a.heads_q * a.head_dim, a.head_dim, a.seq_q, a.head_dim, a.heads_q * a.head_dim};
  }
  HeadOperand K(const void* data) const {
    return {data, type, a.seq_k * a.heads_k * a.head_dim, a.head_dim, a.seq_k, a.head_dim, a.heads_k * a.head_dim, true};
  }
  HeadOperand V(const void* data) const {
    return {data, type, a.seq_k * a.heads_k * a.v_dim, a.v_dim, a.seq_k, a.v_dim, a.heads_k * a.v_dim, true};
  }
  HeadOperand O(const void* data) const {
    return {data, type, a.seq_q * a.heads_q * a.v_dim, a.v_dim, a.seq_q, a.v_dim, a.heads_q * a.v_dim};
  }
  // [batches, heads_q, seq_q, seq_k] of `of`, counted from the chunk's first element.
  HeadOperand Scores(const void* data, ElemType of) const {
    return {data, of, a.heads_q * a.seq_q * a.seq_k, a.seq_q * a.seq_k, a.seq_q, a.seq_k, a.seq_k, false, true};
  }
};

Tensor ScoresBuffer(KernelContext& ctx, const AttentionShape& a, int64_t batches, ElemType type) {
  return Tensor::Empty({{batches, a.heads_q, a.seq_q, a.seq_k}, DataTypeOf(type)}, ctx.allocator(), ctx.stream());
}

// (q, k, v, fixed_seed_offset?, attn_mask?) → out, softmax, softmax_lse, seed_offset.
absl::Status FlashAttnKernel(KernelContext& ctx) {
  const Tensor& q = *ctx.input(0);
  PDIST_ASSIGN_OR_RETURN(ElemType type, ElemTypeOf("flash_attn", q.dtype()));
  PDIST_ASSIGN_OR_RETURN(bool is_test, ir::GetBool(ctx.attrs(), "is_test"));
  PDIST_RETURN_IF_ERROR(CheckNoDropout(ctx, is_test));
  PDIST_ASSIGN_OR_RETURN(bool return_softmax, ir::GetBool(ctx.attrs(), "return_softmax"));
  PDIST_ASSIGN_OR_RETURN(AttentionShape a, ShapeOf(ctx, ctx.input(4)));
  Tensor& out = ctx.AllocateOutput(0);
  Tensor& softmax = ctx.AllocateOutput(1);
  Tensor& lse = ctx.AllocateOutput(2);
  Tensor& seed_offset = ctx.AllocateOutput(3);
  const cudaStream_t stream = StreamOf(ctx);
  const Tensor* fixed = ctx.input(3);
  if (fixed != nullptr && fixed->defined()) {
    PDIST_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(seed_offset.raw(), fixed->raw(), static_cast<size_t>(seed_offset.num_bytes()),
                                               cudaMemcpyDeviceToDevice, stream));
  } else {
    PDIST_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(seed_offset.raw(), 0, static_cast<size_t>(seed_offset.num_bytes()), stream));
  }
  PDIST_ASSIGN_OR_RETURN(Form form, FormOf(ctx, type, ctx.input(4), return_softmax, a.causal));
  auto cudnn = [&] {
#if PDIST_HAVE_CUDNN
    return CudnnAttentionForward(ctx, a, type, q.raw(), ctx.input(1)->raw(), ctx.input(2)->raw(), out.raw(),
                                 lse.raw());
#else
    return absl::UnavailableError("this build has no cuDNN attention");
#endif
  };
  PDIST_ASSIGN_OR_RETURN(bool fused, RanFused(ctx, form, cudnn));
  if (fused) return absl::OkStatus();
  const Operands of{a, type};
  const ElemType score_type = ScoreType(type);
  const int64_t chunk = AttentionChunkBatches(a);
  const Tensor scores = ScoresBuffer(ctx, a, chunk, score_type);
  // The probabilities go straight to the softmax output where it is asked for.
  const Tensor probs = return_softmax ? Tensor() : ScoresBuffer(ctx, a, chunk, type);
  for (int64_t b0 = 0; b0 < a.batch; b0 += chunk) {
    const int64_t batches = std::min(chunk, a.batch - b0);
    const void* p = return_softmax ? static_cast<const char*>(softmax.raw()) +
                                         b0 * a.heads_q * a.seq_q * a.seq_k * ElemTypeSize(type)
                                   : probs.raw();
    const HeadOperand s_op = of.Scores(scores.raw(), score_type), p_op = of.Scores(p, type);
    PDIST_RETURN_IF_ERROR(PerHeadGemm(ctx, a, b0, batches, of.Q(q.raw()), of.K(ctx.input(1)->raw()).T(), s_op, 1));
    PDIST_RETURN_IF_ERROR(CudaStatus(LaunchAttentionProbs(type, scores.raw(), nullptr, const_cast<void*>(p), lse.raw(),
                                                          a, b0, batches, stream),
                                     "flash_attn probabilities"));
    PDIST_RETURN_IF_ERROR(PerHeadGemm(ctx, a, b0, batches, p_op, of.V(ctx.input(2)->raw()), of.O(out.raw()), 1));
  }
  return absl::OkStatus();
}

// (q, k, v, out, softmax_lse, seed_offset?, attn_mask?, out_grad) → q_grad, k_grad, v_grad.
absl::Status FlashAttnGradKernel(KernelContext& ctx) {
  const Tensor& q = *ctx.input(0);
  PDIST_ASSIGN_OR_RETURN(ElemType type, ElemTypeOf("flash_attn_grad", q.dtype()));
  PDIST_RETURN_IF_ERROR(CheckNoDropout(ctx, /*is_test=*/false));
  PDIST_ASSIGN_OR_RETURN(AttentionShape a, ShapeOf(ctx, ctx.input(6)));
  Tensor& q_grad = ctx.AllocateOutput(0);
  Tensor& k_grad = ctx.AllocateOutput(1);
  Tensor& v_grad = ctx.AllocateOutput(2);
  const Tensor& k = *ctx.input(1);
  const Tensor& v = *ctx.input(2);
  const Tensor& out = *ctx.input(3);
  const Tensor& lse = *ctx.input(4);
  const Tensor& out_grad = *ctx.input(7);
  PDIST_ASSIGN_OR_RETURN(Form form, FormOf(ctx, type, ctx.input(6), /*return_softmax=*/false, a.causal));
  auto cudnn = [&] {
#if PDIST_HAVE_CUDNN
    return CudnnAttentionBackward(ctx, a, type, q.raw(), k.raw(), v.raw(), out.raw(), out_grad.raw(), lse.raw(),
                                  q_grad.raw(), k_grad.raw(), v_grad.raw());
#else
    return absl::UnavailableError("this build has no cuDNN attention");
#endif
  };
  PDIST_ASSIGN_OR_RETURN(bool fused, RanFused(ctx, form, cudnn));
  if (fused) return absl::OkStatus();
  const Operands of{a, type};
  const ElemType score_type = ScoreType(type);
  const int64_t chunk = AttentionChunkBatches(a);
  const Tensor scores = ScoresBuffer(ctx, a, chunk, score_type);
  const Tensor dprobs = ScoresBuffer(ctx, a, chunk, score_type);
  const Tensor probs = ScoresBuffer(ctx, a, chunk, type);  // P, then dS in its place
  const HeadOperand s_op = of.Scores(scores.raw(), score_type), dp_op = of.Scores(dprobs.raw(), score_type);
  const HeadOperand p_op = of.Scores(probs.raw(), type);
  const cudaStream_t stream = StreamOf(ctx);
  for (int64_t b0 = 0; b0 < a.batch; b0 += chunk) {
    const int64_t batches = std::min(chunk, a.batch - b0);
    PDIST_RETURN_IF_ERROR(PerHeadGemm(ctx, a, b0, batches, of.Q(q.raw()), of.K(k.raw()).T(), s_op, 1));
    PDIST_RETURN_IF_ERROR(CudaStatus(LaunchAttentionProbs(type, scores.raw(), lse.raw(), probs.raw(), nullptr, a, b0,
                                                          batches, stream),
                                     "flash_attn_grad probabilities"));
    PDIST_RETURN_IF_ERROR(PerHeadGemm(ctx, a, b0, batches, p_op.T(), of.O(out_grad.raw()), of.V(v_grad.raw()), 1));
    PDIST_RETURN_IF_ERROR(PerHeadGemm(ctx, a, b0, batches, of.O(out_grad.raw()), of.V(v.raw()).T(), dp_op, 1));
    PDIST_RETURN_IF_ERROR(CudaStatus(LaunchAttentionScoreGrad(type, scores.raw(), dprobs.raw(), out.raw(),
                                                              out_grad.raw(), lse.raw(), probs.raw(), a, b0, batches,
                                                              stream),
                                     "flash_attn_grad scores"));
    PDIST_RETURN_IF_ERROR(PerHeadGemm(ctx, a, b0, batches, p_op, of.K(k.raw()), of.Q(q_grad.raw()), a.scale));
    PDIST_RETURN_IF_ERROR(PerHeadGemm(ctx, a, b0, batches, p_op.T(), of.Q(q.raw()), of.K(k_grad.raw()), a.scale));
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterAttentionKernels(KernelRegistry& registry) {
  registry.Register(DeviceType::kCUDA, "flash_attn", FlashAttnKernel);
  registry.Register(DeviceType::kCUDA, "flash_attention", FlashAttnKernel);  // Paddle's other name for it
  registry.Register(DeviceType::kCUDA, "flash_attn_grad", FlashAttnGradKernel);
}

}  // namespace pdist::exec::cuda
