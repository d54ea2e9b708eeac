// DecoderSpec: the one decoder-only transformer skeleton that GPT and LLaMA configure.
//
//   tokens ─ embedding(wte) (+ wpe) ─┬─ [pre-norm block] × layers ─ norm ─ head ─ cross-entropy ─ mean
//   block:  x += proj(attention(norm_1(x)));  x += mlp(norm_2(x))
//
// Both models share the parameter names below (only the prefix differs), so a strategy
// written against "*.h.*.attn.qkv.weight" applies to either:
//   <p>.wte [V, h]   <p>.wpe [s, h] (GPT only)
//   <p>.h.<i>.ln_1.weight/.bias   <p>.h.<i>.attn.qkv.weight/.bias   <p>.h.<i>.attn.proj.weight/.bias
//   <p>.h.<i>.ln_2.weight/.bias   <p>.h.<i>.mlp.{gate,up,down}.weight/.bias
//   <p>.ln_f.weight/.bias         <p>.lm_head.weight [h, V] (untied only)
// (.bias only where the architecture has biases; gate only for SwiGLU.)
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "ir/models/layer_builder.h"
#include "ir/program.h"
#include "ir/types.h"

namespace pdist::ir::models {

enum class MlpKind : int8_t {
  kGelu,    // down(gelu_tanh(up(x)))           — GPT-2
  kSwiGlu,  // down(silu(gate(x)) * up(x))      — LLaMA
};

struct DecoderSpec {
  std::string config_name;  // "GptConfig": names the fields in validation errors
  std::string prefix;       // "gpt": first component of every parameter name
  int64_t vocab = 0;
  int64_t hidden = 0;
  int64_t layers = 0;
  int64_t heads = 0;
  int64_t ffn_hidden = 0;  // resolved (never 0 here)
  int64_t seq_len = 0;
  int64_t batch = 0;
  bool tied_embeddings = false;
  DataType dtype = DataType::kFloat32;
  double dropout = 0.0;            // embedding and residual-branch dropout
  double attention_dropout = 0.0;  // on attention probabilities (flash_attn's own; no CPU kernel yet)
  NormKind norm = NormKind::kLayerNorm;
  double norm_epsilon = 1e-5;
  bool bias = true;               // biases on every linear layer
  bool learned_positions = true;  // <p>.wpe added to the token embedding
  bool rope = false;              // rotary embedding of q and k
  double rope_theta = 10000.0;
  MlpKind mlp = MlpKind::kGelu;
  bool f32_loss = false;  // the loss on bf16/f16 logits cast to f32, as Megatron-LM computes it
};

// InvalidArgument naming "<config_name>.<field>" and its value for the first bad field.
absl::Status ValidateDecoder(const DecoderSpec& spec);

// Data "tokens" and "labels" i64[batch, seq]; loss = mean token cross-entropy (a scalar).
absl::StatusOr<Program> BuildDecoder(const DecoderSpec& spec);

// The exact number of parameter elements BuildDecoder creates.
int64_t DecoderParameterCount(const DecoderSpec& spec);

}  // namespace pdist::ir::models
