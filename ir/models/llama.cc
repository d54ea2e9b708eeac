// BuildLlama: LlamaConfig → DecoderSpec (RMSNorm, no biases, RoPE, SwiGLU MLP).
#include "ir/models/llama.h"

#include "ir/models/decoder.h"

namespace pdist::ir::models {
namespace {

DecoderSpec ToSpec(const LlamaConfig& c) {
  return DecoderSpec{.config_name = "LlamaConfig",
                     .prefix = "llama",
                     .vocab = c.vocab,
                     .hidden = c.hidden,
                     .layers = c.layers,
                     .heads = c.heads,
                     .ffn_hidden = c.ffn_hidden == 0 ? LlamaDefaultFfnHidden(c.hidden) : c.ffn_hidden,
                     .seq_len = c.seq_len,
                     .batch = c.batch,
                     .tied_embeddings = c.tied_embeddings,
                     .dtype = c.dtype,
                     .dropout = c.dropout,
                     .attention_dropout = c.attention_dropout,
                     .norm = NormKind::kRmsNorm,
                     .norm_epsilon = c.rms_epsilon,
                     .bias = false,
                     .learned_positions = false,
                     .rope = true,
                     .rope_theta = c.rope_theta,
                     .mlp = MlpKind::kSwiGlu,
                     .f32_loss = c.f32_loss};
}

}  // namespace

int64_t LlamaDefaultFfnHidden(int64_t hidden) {
  const int64_t two_thirds = (8 * hidden + 2) / 3;  // ceil(8h / 3)
  return (two_thirds + 7) / 8 * 8;
}

absl::Status ValidateLlamaConfig(const LlamaConfig& config) { return ValidateDecoder(ToSpec(config)); }
absl::StatusOr<Program> BuildLlama(const LlamaConfig& config) { return BuildDecoder(ToSpec(config)); }
int64_t LlamaParameterCount(const LlamaConfig& config) { return DecoderParameterCount(ToSpec(config)); }

}  // namespace pdist::ir::models
