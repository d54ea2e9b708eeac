// Which form runs flash_attn and flash_attn_grad on a GPU: cuDNN's fused attention (its SDPA
// graph: FlashAttention-style tiles, nothing of size seq² in memory) where it computes exactly
// what the op means, else the GEMM form (executor/cuda/attention_kernels.cc), which handles every
// case and is what the fused form is checked against. Plain C++, so the CPU tests check the rule.
//
// PDIST_CUDA_ATTENTION picks: unset or "auto" — cuDNN where it applies and loads, the GEMMs
// elsewhere; "gemm" — always the GEMMs; "cudnn" — cuDNN or an error saying why not (for checks
// that must measure it).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace pdist::exec::cuda {

inline constexpr char kAttentionEnv[] = "PDIST_CUDA_ATTENTION";

enum class AttentionForm { kGemm, kCudnn };

// What of a flash_attn / flash_attn_grad decides the form.
struct AttentionCase {
  bool low_precision = false;   // bf16 or f16 (cuDNN's fused attention has no f32/f64 kernels)
  bool dropout = false;         // p > 0 in training: cuDNN's RNG is not pdist's counter stream
  bool mask = false;            // an additive attn_mask
  bool return_softmax = false;  // the probabilities as an output
  int64_t head_dim = 0, v_dim = 0;
  bool causal = false;
  int64_t seq_q = 0, seq_k = 0;
};

// Why cuDNN does not apply ("" where it does).
inline std::string CudnnAttentionDeclines(const AttentionCase& c) {
  if (!c.low_precision) return "cuDNN's fused attention takes bf16 or f16 only";
  if (c.dropout) return "attention dropout draws pdist's own random stream";
  if (c.mask) return "an additive attn_mask";
  if (c.return_softmax) return "return_softmax asks for the probabilities";
  if (c.head_dim != c.v_dim) return "v's head_dim differs from q's";
  if (c.head_dim % 8 != 0 || c.head_dim > 128) return "head_dim is not a multiple of 8 up to 128";
  // Queries that see no key (causal, bottom-right, more queries than keys): their lse is -inf,
  // which the GEMM form's backward reads as empty rows and cuDNN's need not. cuDNN's forward
  // refuses the shape anyway; declining it here keeps both directions in one form.
  if (c.causal && c.seq_q > c.seq_k) return "causal with more queries than keys";
  return "";
}

struct AttentionChoice {
  AttentionForm form = AttentionForm::kGemm;
  std::string error;  // set when "cudnn" was asked for and cannot be had
};

// `requested`: the environment variable's value (empty when unset); `cudnn_built`: whether this
// build has the cuDNN form (PDIST_HAVE_CUDNN).
inline AttentionChoice ChooseAttention(const AttentionCase& c, std::string_view requested, bool cudnn_built) {
  if (requested == "gemm") return {};
  const bool insist = requested == "cudnn";
  if (!insist && !requested.empty() && requested != "auto") {
    return {AttentionForm::kGemm, std::string(kAttentionEnv) + "=" + std::string(requested) +
                                      ": expected auto, cudnn or gemm"};
  }
  if (!cudnn_built) {
    return {AttentionForm::kGemm, insist ? "this build has no cuDNN attention (scripts/fetch-cudnn-frontend.sh, "
                                           "then reconfigure)"
                                         : ""};
  }
  const std::string declines = CudnnAttentionDeclines(c);
  if (declines.empty()) return {AttentionForm::kCudnn, ""};
  return {AttentionForm::kGemm, insist ? "cuDNN attention does not apply: " + declines : ""};
}

}  // namespace pdist::exec::cuda
