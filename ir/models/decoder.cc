// BuildDecoder: embedding, pre-norm transformer blocks, head and loss for GPT and LLaMA.
#include "ir/models/decoder.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "ir/status.h"

namespace pdist::ir::models {
namespace {

// GPT-2 initialises the position table with a smaller std than the token table.
constexpr double kPositionInitStd = 0.01;

// GPT-2 scales the init of the projections that write into the residual stream (attention
// output, MLP down) by 1/sqrt(2·layers): each of the 2·layers of them adds to the same sum.
double ResidualInitStd(const DecoderSpec& spec) { return kInitStd / std::sqrt(2.0 * spec.layers); }

absl::StatusOr<Value*> FeedForward(LayerBuilder& lb, Value* x, const DecoderSpec& spec, const std::string& name) {
  const LinearSpec in_spec{.bias = spec.bias};
  const LinearSpec out_spec{.bias = spec.bias, .init_std = ResidualInitStd(spec)};
  PDIST_ASSIGN_OR_RETURN(Value * up, lb.Linear(x, spec.ffn_hidden, name + ".up", in_spec));
  Value* act = nullptr;
  if (spec.mlp == MlpKind::kGelu) {
    // GPT-2's tanh approximation ("gelu_new"), which its released weights were trained with.
    PDIST_ASSIGN_OR_RETURN(act, lb.builder().Op1("gelu", {up}, {{"approximate", true}}));
  } else {
    PDIST_ASSIGN_OR_RETURN(Value * gate, lb.Linear(x, spec.ffn_hidden, name + ".gate", in_spec));
    PDIST_ASSIGN_OR_RETURN(Value * silu, lb.builder().Op1("silu", {gate}));
    PDIST_ASSIGN_OR_RETURN(act, lb.builder().Op1("multiply", {silu, up}));
  }
  return lb.Linear(act, spec.hidden, name + ".down", out_spec);
}

// x + dropout(sublayer(norm(x))): one pre-norm residual branch.
template <typename Sublayer>
absl::StatusOr<Value*> ResidualBranch(LayerBuilder& lb, Value* x, const DecoderSpec& spec, const std::string& norm_name,
                                      Sublayer sublayer) {
  PDIST_ASSIGN_OR_RETURN(Value * normed, lb.Norm(x, spec.norm, spec.norm_epsilon, norm_name));
  PDIST_ASSIGN_OR_RETURN(Value * y, sublayer(normed));
  PDIST_ASSIGN_OR_RETURN(y, lb.Dropout(y, spec.dropout));
  return lb.Add(x, y);
}

int64_t NormParams(const DecoderSpec& spec) { return spec.norm == NormKind::kLayerNorm ? 2 * spec.hidden : spec.hidden; }

}  // namespace

absl::Status ValidateDecoder(const DecoderSpec& spec) {
  const std::string& c = spec.config_name;
  for (const auto& [field, value] : {std::pair<const char*, int64_t>{"vocab", spec.vocab},
                                     {"hidden", spec.hidden},
                                     {"heads", spec.heads},
                                     {"ffn_hidden", spec.ffn_hidden},
                                     {"seq_len", spec.seq_len},
                                     {"batch", spec.batch}}) {
    PDIST_RETURN_IF_ERROR(RequireInRange(c, field, value));
  }
  PDIST_RETURN_IF_ERROR(RequireInRange(c, "layers", spec.layers, kMaxModelLayers));
  if (spec.hidden % spec.heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(c, ".hidden (", spec.hidden, ") must be divisible by ", c,
                                                   ".heads (", spec.heads, ")"));
  }
  if (spec.rope && (spec.hidden / spec.heads) % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(c, ".hidden / ", c, ".heads (head_dim ", spec.hidden / spec.heads,
                                                   ") must be even: RoPE rotates pairs of dims"));
  }
  for (const auto& [field, p] : {std::pair{"dropout", spec.dropout}, {"attention_dropout", spec.attention_dropout}}) {
    if (!(p >= 0.0 && p < 1.0)) return absl::InvalidArgumentError(absl::StrCat(c, ".", field, " must be in [0, 1), got ", p));
  }
  if (!IsFloatingPoint(spec.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(c, ".dtype must be floating point (f32 or f64), got ",
                                                   std::string(DataTypeName(spec.dtype))));
  }
  return absl::OkStatus();
}

absl::StatusOr<Program> BuildDecoder(const DecoderSpec& spec) {
  PDIST_RETURN_IF_ERROR(ValidateDecoder(spec));
  Program program;
  LayerBuilder lb(&program, spec.dtype);
  const std::string& p = spec.prefix;
  Value* tokens = lb.builder().Data("tokens", {{spec.batch, spec.seq_len}, DataType::kInt64});
  Value* labels = lb.builder().Data("labels", {{spec.batch, spec.seq_len}, DataType::kInt64});

  Value* wte = lb.Param(p + ".wte", {spec.vocab, spec.hidden}, NormalInit(kInitStd));
  PDIST_ASSIGN_OR_RETURN(Value * x, lb.Embedding(tokens, wte));
  if (spec.learned_positions) {
    // [s, h] broadcasts over the batch: the same as embedding(arange(s), wpe), without a feed.
    Value* wpe = lb.Param(p + ".wpe", {spec.seq_len, spec.hidden}, NormalInit(kPositionInitStd));
    PDIST_ASSIGN_OR_RETURN(x, lb.Add(x, wpe));
  }
  PDIST_ASSIGN_OR_RETURN(x, lb.Dropout(x, spec.dropout));

  const AttentionSpec attention{.heads = spec.heads,
                                .bias = spec.bias,
                                .rope = spec.rope,
                                .rope_theta = spec.rope_theta,
                                .dropout = spec.attention_dropout,
                                .out_init_std = ResidualInitStd(spec)};
  for (int64_t i = 0; i < spec.layers; ++i) {
    const std::string block = absl::StrCat(p, ".h.", i);
    PDIST_ASSIGN_OR_RETURN(x, ResidualBranch(lb, x, spec, block + ".ln_1", [&](Value* h) {
                             return lb.SelfAttention(h, attention, block + ".attn");
                           }));
    PDIST_ASSIGN_OR_RETURN(x, ResidualBranch(lb, x, spec, block + ".ln_2", [&](Value* h) {
                             return FeedForward(lb, h, spec, block + ".mlp");
                           }));
  }
  PDIST_ASSIGN_OR_RETURN(x, lb.Norm(x, spec.norm, spec.norm_epsilon, p + ".ln_f"));

  Value* logits = nullptr;
  if (spec.tied_embeddings) {
    PDIST_ASSIGN_OR_RETURN(logits, lb.builder().Op1("matmul", {x, wte}, {{"trans_y", true}}));
  } else {
    PDIST_ASSIGN_OR_RETURN(logits, lb.Linear(x, spec.vocab, p + ".lm_head", {.bias = false}));
  }
  // cross_entropy_with_softmax takes hard labels with a trailing 1 (Paddle's layout).
  PDIST_ASSIGN_OR_RETURN(Value * labels3, lb.Reshape(labels, {spec.batch, spec.seq_len, 1}));
  // f32_loss: the loss on an f32 copy of low-precision logits, kept for the backward, which
  // writes its gradient over it (Megatron-LM's output.float() and in-place cross entropy).
  Value* loss_logits = logits;
  const bool f32_loss = spec.f32_loss && IsLowPrecisionFloat(spec.dtype);
  if (f32_loss) {
    PDIST_ASSIGN_OR_RETURN(loss_logits, lb.builder().Op1("cast", {logits}, {{"dtype", DataType::kFloat32}}));
  }
  PDIST_ASSIGN_OR_RETURN(Value * loss, lb.SoftmaxCrossEntropyMean(loss_logits, labels3, /*from_logits=*/f32_loss));
  program.set_loss(loss);
  program.add_output("logits", logits);
  return program;
}

int64_t DecoderParameterCount(const DecoderSpec& spec) {
  const int64_t h = spec.hidden, f = spec.ffn_hidden;
  const int64_t b = spec.bias ? 1 : 0;
  const int64_t attention = 4 * h * h + b * 4 * h;  // qkv [h, 3h] and proj [h, h]
  const int64_t mlp = spec.mlp == MlpKind::kGelu ? 2 * h * f + b * (f + h)        // up, down
                                                 : 3 * h * f + b * (2 * f + h);  // gate, up, down
  const int64_t per_layer = attention + mlp + 2 * NormParams(spec);
  return spec.vocab * h + (spec.learned_positions ? spec.seq_len * h : 0) + spec.layers * per_layer +
         NormParams(spec) + (spec.tied_embeddings ? 0 : h * spec.vocab);
}

}  // namespace pdist::ir::models
