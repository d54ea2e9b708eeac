// LayerBuilder: linear, norm, attention and loss pieces expressed as registered ops.
#include "ir/models/layer_builder.h"

#include "absl/strings/str_cat.h"
#include "ir/status.h"

namespace pdist::ir::models {

std::string NormalInit(double std) { return absl::StrCat("normal(", DoubleToString(std), ")"); }

absl::Status RequireInRange(const std::string& config, const std::string& field, int64_t value, int64_t max) {
  if (value > 0 && value <= max) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(config, ".", field, " must be in [1, ", max, "], got ", value));
}

Value* LayerBuilder::Param(const std::string& name, Shape shape, const std::string& init) {
  return builder_.Parameter(name, TensorType{std::move(shape), dtype_}, init);
}

absl::StatusOr<Value*> LayerBuilder::Linear(Value* x, int64_t out_features, const std::string& name,
                                            const LinearSpec& spec) {
  const int64_t in_features = x->type().shape.empty() ? 0 : x->type().shape.back();
  Value* w = Param(name + ".weight", {in_features, out_features}, NormalInit(spec.init_std));
  PDIST_ASSIGN_OR_RETURN(Value * y, builder_.Op1("matmul", {x, w}));
  if (!spec.bias) return y;
  Value* b = Param(name + ".bias", {out_features}, "zeros");
  return Add(y, b);
}

absl::StatusOr<Value*> LayerBuilder::Norm(Value* x, NormKind kind, double epsilon, const std::string& name) {
  const int64_t hidden = x->type().shape.empty() ? 0 : x->type().shape.back();
  const AttributeMap attrs = {{"begin_norm_axis", x->type().rank() - 1}, {"epsilon", epsilon}};
  Value* weight = Param(name + ".weight", {hidden}, "ones");
  if (kind == NormKind::kRmsNorm) {
    PDIST_ASSIGN_OR_RETURN(std::vector<Value*> r, builder_.Create("rms_norm", {x, weight}, attrs));
    return r[0];  // r[1] is the saved inverse RMS
  }
  Value* bias = Param(name + ".bias", {hidden}, "zeros");
  PDIST_ASSIGN_OR_RETURN(std::vector<Value*> r, builder_.Create("layer_norm", {x, weight, bias}, attrs));
  return r[0];  // r[1], r[2]: saved mean and variance
}

absl::StatusOr<QkvHeads> LayerBuilder::SplitHeads(Value* qkv, int64_t heads) {
  const Shape& s = qkv->type().shape;
  if (s.size() != 3 || s[2] % (3 * heads) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("SplitHeads: qkv must be [b, s, 3·h] with h divisible by ", heads, " heads, got ",
                     qkv->type().ToString()));
  }
  const int64_t head_dim = s[2] / (3 * heads);
  PDIST_ASSIGN_OR_RETURN(Value * per_head, Reshape(qkv, {s[0], s[1], heads, 3 * head_dim}));
  PDIST_ASSIGN_OR_RETURN(std::vector<Value*> parts,
                         builder_.Create("split_with_num", {per_head}, {{"num", int64_t{3}}, {"axis", int64_t{-1}}}));
  return QkvHeads{parts[0], parts[1], parts[2]};
}

absl::StatusOr<Value*> LayerBuilder::SelfAttention(Value* x, const AttentionSpec& spec, const std::string& name) {
  const Shape s = x->type().shape;  // [b, seq, h]
  const int64_t hidden = s.back();
  PDIST_ASSIGN_OR_RETURN(Value * qkv, Linear(x, 3 * hidden, name + ".qkv", {.bias = spec.bias}));
  PDIST_ASSIGN_OR_RETURN(QkvHeads heads, SplitHeads(qkv, spec.heads));
  if (spec.rope) {
    // Absent sin/cos/position_ids: fused_rope derives the angles from rotary_emb_base and the
    // position in the sequence.
    PDIST_ASSIGN_OR_RETURN(std::vector<Value*> rotated,
                           builder_.Create("fused_rope", {heads.q, heads.k},
                                           {{"rotary_emb_base", spec.rope_theta}}));
    heads.q = rotated[0];
    heads.k = rotated[1];
  }
  PDIST_ASSIGN_OR_RETURN(std::vector<Value*> attn,
                         builder_.Create("flash_attn", {heads.q, heads.k, heads.v},
                                         {{"causal", true}, {"dropout", spec.dropout}}));
  PDIST_ASSIGN_OR_RETURN(Value * merged, Reshape(attn[0], s));  // attn[0]: out [b, seq, heads, head_dim]
  return Linear(merged, hidden, name + ".proj", {.bias = spec.bias, .init_std = spec.out_init_std});
}

absl::StatusOr<Value*> LayerBuilder::Add(Value* x, Value* y) { return builder_.Op1("add", {x, y}); }

absl::StatusOr<Value*> LayerBuilder::Dropout(Value* x, double p) {
  if (p == 0.0) return x;
  PDIST_ASSIGN_OR_RETURN(std::vector<Value*> r, builder_.Create("dropout", {x}, {{"p", p}}));
  return r[0];  // r[1] is the mask
}

absl::StatusOr<Value*> LayerBuilder::Embedding(Value* ids, Value* table) {
  return builder_.Op1("embedding", {ids, table});
}

absl::StatusOr<Value*> LayerBuilder::SoftmaxCrossEntropyMean(Value* logits, Value* labels, bool from_logits) {
  // A bf16/f16 model's backward recomputes the softmax from the logits (ir/ops/nn.cc): none is
  // made. An f32 one keeps the softmax for its backward, as Paddle's op does, unless from_logits.
  AttributeMap attrs;
  if (from_logits || IsLowPrecisionFloat(logits->type().dtype)) attrs["return_softmax"] = false;
  PDIST_ASSIGN_OR_RETURN(std::vector<Value*> r, builder_.Create("cross_entropy_with_softmax", {logits, labels}, attrs));
  return builder_.Op1("mean", {r[1]});  // r[0] is the softmax (or f[0]), r[1] the per-row loss [..., 1]
}

absl::StatusOr<Value*> LayerBuilder::Reshape(Value* x, const Shape& shape) {
  return builder_.Op1("reshape", {x}, {{"shape", shape}});
}

}  // namespace pdist::ir::models
