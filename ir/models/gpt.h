// GPT-2-style decoder: learned positions, pre-LayerNorm blocks, GELU MLP, biases everywhere.
//
//   PDIST_ASSIGN_OR_RETURN(ir::Program p, BuildGpt({.vocab = 256, .hidden = 64, .layers = 2, .heads = 4}));
//   // data "tokens", "labels" i64[8,32]; parameters gpt.wte, gpt.wpe, gpt.h.0.ln_1.weight, ...;
//   // p.loss(): f32[] = mean next-token cross-entropy
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "ir/program.h"
#include "ir/types.h"

namespace pdist::ir::models {

struct GptConfig {
  int64_t vocab = 256;
  int64_t hidden = 64;
  int64_t layers = 2;
  int64_t heads = 4;
  int64_t ffn_hidden = 0;  // 0 → 4·hidden
  int64_t seq_len = 32;
  int64_t batch = 8;       // micro-batch
  bool tied_embeddings = false;  // true: the head is matmul(x, wte, trans_y), as in GPT-2
  DataType dtype = DataType::kFloat32;
  double dropout = 0.0;    // embedding and residual dropout
  // Dropout of attention probabilities, inside flash_attn: the CPU kernel does not have it yet
  // (training such a model on CPU ranks fails, naming the op), so it is separate and off.
  double attention_dropout = 0.0;
  // The loss on bf16/f16 logits cast to f32, as Megatron-LM (`output.float()`) and Megatron core's
  // cross entropy compute it; without it the loss reads the low-precision logits.
  bool f32_loss = false;
};

// LayerNorm epsilon of every GPT norm (GPT-2's value).
inline constexpr double kGptLayerNormEpsilon = 1e-5;

// InvalidArgument naming the field and its value, e.g. "GptConfig.hidden (64) must be
// divisible by GptConfig.heads (5)".
absl::Status ValidateGptConfig(const GptConfig& config);

// The forward program with its loss; see ir/models/decoder.h for the parameter names.
absl::StatusOr<Program> BuildGpt(const GptConfig& config);

// Exactly the parameter count of BuildGpt(config). For a tied model with ffn = 4h this is
// Megatron-LM's eq. 2, 12·l·h²·(1 + 13/(12h) + (V+s)/(12·l·h)), plus 2h for the final LayerNorm,
// which eq. 2 leaves out.
int64_t GptParameterCount(const GptConfig& config);

}  // namespace pdist::ir::models
