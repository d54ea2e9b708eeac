// Host side of the CUDA flash_attn and flash_attn_grad (device side: attention_launch.cu): the
// CPU kernel's semantics (grouped kv heads, bottom-right causal mask, additive mask, no dropout
// in training), sizes the untiled kernel cannot hold refused by name.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "executor/cuda/cuda_backend.h"
#include "executor/cuda/cuda_kernels.h"
#include "executor/cuda/cuda_status.h"
#include "executor/cuda/elem_type.h"
#include "executor/cuda/launch.h"
#include "executor/kernel.h"
#include "ir/status.h"

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

absl::StatusOr<AttentionShape> ShapeOf(const KernelContext& ctx, ElemType type, const Tensor* mask) {
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
  const int64_t max_seq = MaxAttentionSeq(type);
  if (a.seq_q > max_seq || a.seq_k > max_seq) {
    return absl::UnimplementedError(absl::StrCat(ctx.op().type(), " on cuda: sequence ", std::max(a.seq_q, a.seq_k),
                                                 " is longer than the untiled kernel holds (", max_seq, ")"));
  }
  if (a.head_dim > MaxAttentionHeadDim() || a.v_dim > MaxAttentionHeadDim()) {
    return absl::UnimplementedError(absl::StrCat(ctx.op().type(), " on cuda: head dim ", std::max(a.head_dim, a.v_dim),
                                                 " above ", MaxAttentionHeadDim()));
  }
  return a;
}

// (q, k, v, fixed_seed_offset?, attn_mask?) → out, softmax, softmax_lse, seed_offset.
absl::Status FlashAttnKernel(KernelContext& ctx) {
  const Tensor& q = *ctx.input(0);
  PDIST_ASSIGN_OR_RETURN(ElemType type, ElemTypeOf("flash_attn", q.dtype()));
  PDIST_ASSIGN_OR_RETURN(bool is_test, ir::GetBool(ctx.attrs(), "is_test"));
  PDIST_RETURN_IF_ERROR(CheckNoDropout(ctx, is_test));
  PDIST_ASSIGN_OR_RETURN(bool return_softmax, ir::GetBool(ctx.attrs(), "return_softmax"));
  PDIST_ASSIGN_OR_RETURN(AttentionShape a, ShapeOf(ctx, type, ctx.input(4)));
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
  return CudaStatus(LaunchFlashAttn(type, q.raw(), ctx.input(1)->raw(), ctx.input(2)->raw(), out.raw(),
                                    return_softmax ? softmax.raw() : nullptr, lse.raw(), a, stream),
                    "flash_attn");
}

// (q, k, v, out, softmax_lse, seed_offset?, attn_mask?, out_grad) → q_grad, k_grad, v_grad.
absl::Status FlashAttnGradKernel(KernelContext& ctx) {
  const Tensor& q = *ctx.input(0);
  PDIST_ASSIGN_OR_RETURN(ElemType type, ElemTypeOf("flash_attn_grad", q.dtype()));
  PDIST_RETURN_IF_ERROR(CheckNoDropout(ctx, /*is_test=*/false));
  PDIST_ASSIGN_OR_RETURN(AttentionShape a, ShapeOf(ctx, type, ctx.input(6)));
  Tensor& q_grad = ctx.AllocateOutput(0);
  Tensor& k_grad = ctx.AllocateOutput(1);
  Tensor& v_grad = ctx.AllocateOutput(2);
  // D_i = Σ dO·O per query row, from the dq kernel to the dk/dv one.
  const Tensor row_dot = Tensor::Empty({{a.batch * a.heads_q * a.seq_q}, ir::DataType::kFloat64}, ctx.allocator(),
                                       ctx.stream());
  return CudaStatus(LaunchFlashAttnGrad(type, q.raw(), ctx.input(1)->raw(), ctx.input(2)->raw(), ctx.input(3)->raw(),
                                        ctx.input(4)->raw(), ctx.input(7)->raw(), q_grad.raw(), k_grad.raw(),
                                        v_grad.raw(), static_cast<double*>(row_dot.raw()), a, StreamOf(ctx)),
                    "flash_attn_grad");
}

}  // namespace

void RegisterAttentionKernels(KernelRegistry& registry) {
  registry.Register(DeviceType::kCUDA, "flash_attn", FlashAttnKernel);
  registry.Register(DeviceType::kCUDA, "flash_attn_grad", FlashAttnGradKernel);
}

}  // namespace pdist::exec::cuda
