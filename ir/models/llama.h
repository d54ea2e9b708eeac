// LLaMA-style decoder: RMSNorm, rotary embeddings (fused_rope), SwiGLU MLP, no biases.
//
//   PDIST_ASSIGN_OR_RETURN(ir::Program p, BuildLlama({.vocab = 256, .hidden = 64, .layers = 2, .heads = 4}));
//   // parameters llama.wte, llama.h.0.ln_1.weight, llama.h.0.attn.qkv.weight,
//   // llama.h.0.mlp.gate.weight, ..., llama.ln_f.weight, llama.lm_head.weight
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "ir/program.h"
#include "ir/types.h"

namespace pdist::ir::models {

struct LlamaConfig {
  int64_t vocab = 256;
  int64_t hidden = 64;
  int64_t layers = 2;
  int64_t heads = 4;
  int64_t ffn_hidden = 0;  // 0 → LlamaDefaultFfnHidden(hidden)
  int64_t seq_len = 32;
  int64_t batch = 8;       // micro-batch
  bool tied_embeddings = false;
  DataType dtype = DataType::kFloat32;
  double dropout = 0.0;            // embedding and residual dropout
  double attention_dropout = 0.0;  // inside flash_attn (no CPU kernel yet; see gpt.h)
  double rms_epsilon = 1e-6;
  double rope_theta = 10000.0;  // fused_rope's rotary_emb_base
  bool f32_loss = false;        // the loss on logits cast to f32 (as GptConfig::f32_loss)
};

// LLaMA's SwiGLU width: 2/3 of 4h (same parameter count as a 4h GELU MLP), rounded up to a
// multiple of 8 so that it splits evenly for tensor parallelism up to degree 8
// (LLaMA itself rounds to 256, too coarse for small test models). 64 → 176.
int64_t LlamaDefaultFfnHidden(int64_t hidden);

absl::Status ValidateLlamaConfig(const LlamaConfig& config);
absl::StatusOr<Program> BuildLlama(const LlamaConfig& config);
// Exactly the parameter count of BuildLlama(config):
// V·h + l·(4h² + 3·h·ffn + 2h) + h + (untied ? h·V : 0).
int64_t LlamaParameterCount(const LlamaConfig& config);

}  // namespace pdist::ir::models
