// BuildGpt: GptConfig → DecoderSpec (LayerNorm, biases, learned positions, GELU MLP).
#include "ir/models/gpt.h"

#include "ir/models/decoder.h"

namespace pdist::ir::models {
namespace {

DecoderSpec ToSpec(const GptConfig& c) {
  return DecoderSpec{.config_name = "GptConfig",
                     .prefix = "gpt",
                     .vocab = c.vocab,
                     .hidden = c.hidden,
                     .layers = c.layers,
                     .heads = c.heads,
                     .ffn_hidden = c.ffn_hidden == 0 ? 4 * c.hidden : c.ffn_hidden,
                     .seq_len = c.seq_len,
                     .batch = c.batch,
                     .tied_embeddings = c.tied_embeddings,
                     .dtype = c.dtype,
                     .dropout = c.dropout,
                     .attention_dropout = c.attention_dropout,
                     .norm = NormKind::kLayerNorm,
                     .norm_epsilon = kGptLayerNormEpsilon,
                     .bias = true,
                     .learned_positions = true,
                     .rope = false,
                     .mlp = MlpKind::kGelu,
                     .f32_loss = c.f32_loss};
}

}  // namespace

absl::Status ValidateGptConfig(const GptConfig& config) { return ValidateDecoder(ToSpec(config)); }
absl::StatusOr<Program> BuildGpt(const GptConfig& config) { return BuildDecoder(ToSpec(config)); }
int64_t GptParameterCount(const GptConfig& config) { return DecoderParameterCount(ToSpec(config)); }

}  // namespace pdist::ir::models
