// flash_attn and flash_attn_grad through cuDNN's fused attention (its scaled-dot-product graph,
// built with NVIDIA's cuDNN frontend): FlashAttention-style tiles that keep the scores on chip,
// where the GEMM form (executor/cuda/attention_kernels.cc) writes them to memory and back.
// Compiled where the frontend's headers are (PDIST_HAVE_CUDNN); libcudnn.so.9 is opened on first
// use, so a machine without cuDNN runs the GEMM form. executor/cuda/attention_choice.h says which
// cases this form takes; those are the op's semantics exactly:
//
//   forward    out = softmax(scale·q·kᵀ [causal: bottom-right]) · v      lse: f32 [b, hq, sq]
//   backward   dq, dk, dv from q, k, v, out, dout and that lse (deterministic algorithm)
//
// q, k, v, out [batch, seq, heads, head_dim] as pdist stores them (cuDNN reads the strides);
// grouped kv heads as they are. Built graphs are cached per device and shape.
#pragma once

#include "absl/status/status.h"
#include "executor/cuda/launch.h"
#include "executor/kernel.h"

namespace pdist::exec::cuda {

// OK: it ran. kUnavailable: cuDNN cannot run this case on this machine (no libcudnn, an older
// version, no engine for the shape), the message saying why: the GEMM form may run it instead.
// Anything else is an error.
absl::Status CudnnAttentionForward(KernelContext& ctx, const AttentionShape& a, ElemType type, const void* q,
                                   const void* k, const void* v, void* out, void* lse);
absl::Status CudnnAttentionBackward(KernelContext& ctx, const AttentionShape& a, ElemType type, const void* q,
                                    const void* k, const void* v, const void* out, const void* out_grad,
                                    const void* lse, void* q_grad, void* k_grad, void* v_grad);

}  // namespace pdist::exec::cuda
