// NN ops: embedding, cross_entropy_with_softmax, fused_rope (Paddle's
// fused_rotary_position_embedding) and their gradient ops; flash_attn lives in attention.cc.
//
//   %2 = embedding(%ids, %wte) {padding_idx = -1, sparse = false} : f32[8,32,64]
//   %3, %4 = cross_entropy_with_softmax(%logits, %labels) {...} : f32[8,32,256], f32[8,32,1]
//   %5, %6 = cross_entropy_with_softmax(%l16, %labels) {...} : bf16[8,32,256], f32[8,32,1]
//   %9 = cross_entropy_with_softmax_grad_from_logits(%labels, %l16, %8) {...} : bf16[8,32,256]
//   %5, %6, %7 = fused_rope(%q, %k) {use_neox_rotary_style = true, ...} : f32[8,32,4,16], f32[8,32,4,16], f32[0]
#include "absl/strings/str_cat.h"
#include "ir/op_def.h"
#include "ir/ops/op_families.h"
#include "ir/ops/op_helpers.h"
#include "ir/spmd/rules_nn.h"
#include "ir/status.h"

namespace pdist::ir {

absl::Status RegisterAttentionOps(OpRegistry& registry);  // ir/ops/attention.cc

namespace {

using ops::EmitGradOp;

bool IsIndex(DataType dtype) { return dtype == DataType::kInt32 || dtype == DataType::kInt64; }

// The result type of an absent optional tensor (no k → no out_k): an empty f[0].
TensorType EmptyOf(DataType dtype) { return {{0}, dtype}; }

std::vector<Value*> NoGrads(const Operation& op) { return std::vector<Value*>(op.num_operands(), nullptr); }

// --- embedding ---------------------------------------------------------------------------

// (x ids [...], weight [V, H]) → out [..., H]. padding_idx is -1 (none) or a row in [0, V):
// that row reads as zeros and receives no gradient. sparse is accepted for Paddle
// compatibility; the gradient is always a dense [V, H] tensor.
absl::StatusOr<std::vector<TensorType>> EmbeddingMeta(const InputTypes& in, const AttributeMap& attrs) {
  if (!IsIndex(in[0]->dtype)) {
    return absl::InvalidArgumentError(absl::StrCat("ids x must be i32 or i64, got ", in[0]->ToString()));
  }
  PDIST_RETURN_IF_ERROR(ops::ExpectFloat(in, 1, "weight"));
  PDIST_RETURN_IF_ERROR(ops::ExpectRank(in, 1, 2, "weight [vocab, hidden]"));
  PDIST_ASSIGN_OR_RETURN(int64_t padding_idx, GetInt(attrs, "padding_idx"));
  const int64_t vocab = in[1]->shape[0];
  if (padding_idx < -1 || padding_idx >= vocab) {
    return absl::InvalidArgumentError(absl::StrCat("padding_idx ", padding_idx, " must be -1 (none) or in [0, ", vocab,
                                                   "); negative rows are resolved by the frontend"));
  }
  Shape out = in[0]->shape;
  out.push_back(in[1]->shape[1]);
  return std::vector<TensorType>{{out, in[1]->dtype}};
}

// (x, weight, out_grad) → weight_grad.
absl::StatusOr<std::vector<TensorType>> EmbeddingGradMeta(const InputTypes& in, const AttributeMap& attrs) {
  PDIST_ASSIGN_OR_RETURN(std::vector<TensorType> fwd, EmbeddingMeta({in[0], in[1]}, attrs));
  if (*in[2] != fwd[0]) {
    return absl::InvalidArgumentError(
        absl::StrCat("out_grad must be ", fwd[0].ToString(), ", got ", in[2]->ToString()));
  }
  return std::vector<TensorType>{*in[1]};
}

absl::StatusOr<std::vector<Value*>> EmbeddingGrad(Builder& b, const Operation& op,
                                                  const std::vector<Value*>& out_grads) {
  if (out_grads[0] == nullptr) return NoGrads(op);
  return EmitGradOp(b, op, "embedding_grad", {op.operand(0), op.operand(1), out_grads[0]}, {1});
}

OpCost EmbeddingCost(const InputTypes& in, const std::vector<TensorType>& out, const AttributeMap&) {
  // A gather: only the looked-up rows of the table move, not the whole table.
  const double moved = 2.0 * static_cast<double>(out[0].num_bytes());
  return {0, static_cast<double>(in[0]->num_bytes()) + moved};
}

OpCost EmbeddingGradCost(const InputTypes& in, const std::vector<TensorType>& out, const AttributeMap&) {
  // A scatter-add into a zeroed table: one add per out_grad element, plus the table write.
  return {static_cast<double>(in[2]->num_elements()),
          static_cast<double>(in[0]->num_bytes() + in[2]->num_bytes() + out[0].num_bytes())};
}

// --- cross_entropy_with_softmax ----------------------------------------------------------

// (logits [..., V, ...], label) → softmax (logits' type; an empty f[0] without return_softmax),
// loss (logits' shape with 1 at axis, in the type the op computes in: f32 for bf16/f16 logits,
// as attention's softmax_lse — a bf16 loss would round every token's loss to 3 digits and seed
// the backward with a rounded 1/N).
// Hard label: integer, logits' shape with 1 at axis. Soft label: logits' type (a distribution).
absl::StatusOr<std::vector<TensorType>> CrossEntropyMeta(const InputTypes& in, const AttributeMap& attrs) {
  PDIST_RETURN_IF_ERROR(ops::ExpectFloat(in, 0, "logits"));
  const TensorType& logits = *in[0];
  const TensorType& label = *in[1];
  if (logits.rank() == 0) return absl::InvalidArgumentError("logits must have rank >= 1");
  PDIST_ASSIGN_OR_RETURN(int64_t axis, GetInt(attrs, "axis"));
  PDIST_ASSIGN_OR_RETURN(axis, ops::NormalizeAxis(axis, logits.rank()));
  PDIST_ASSIGN_OR_RETURN(bool soft_label, GetBool(attrs, "soft_label"));
  TensorType loss = {logits.shape, ComputeDtype(logits.dtype)};
  loss.shape[static_cast<size_t>(axis)] = 1;
  if (soft_label) {
    if (label != logits) {
      return absl::InvalidArgumentError(
          absl::StrCat("a soft label must match logits ", logits.ToString(), ", got ", label.ToString()));
    }
  } else if (!IsIndex(label.dtype) || label.shape != loss.shape) {
    return absl::InvalidArgumentError(absl::StrCat("a hard label must be i32/i64 of shape ", ShapeToString(loss.shape),
                                                   " (logits' shape with 1 at axis ", axis, "), got ",
                                                   label.ToString()));
  }
  PDIST_ASSIGN_OR_RETURN(bool return_softmax, GetBool(attrs, "return_softmax"));
  return std::vector<TensorType>{return_softmax ? logits : EmptyOf(logits.dtype), loss};
}

// (label, softmax, loss_grad) → logits_grad; also (label, logits, loss_grad) → logits_grad of
// the _from_logits form, whose second operand has the same type.
absl::StatusOr<std::vector<TensorType>> CrossEntropyGradMeta(const InputTypes& in, const AttributeMap& attrs) {
  PDIST_ASSIGN_OR_RETURN(std::vector<TensorType> fwd, CrossEntropyMeta({in[1], in[0]}, attrs));
  if (*in[2] != fwd[1]) {
    return absl::InvalidArgumentError(
        absl::StrCat("loss_grad must be ", fwd[1].ToString(), ", got ", in[2]->ToString()));
  }
  return std::vector<TensorType>{*in[1]};
}

// Only the loss is differentiated: the softmax result is auxiliary (as in Paddle), and the
// label gets no gradient. With bf16/f16 logits the backward reads the logits and recomputes the
// softmax in f32 (one more pass over a row it reads anyway), instead of keeping the softmax:
// kept in the logits' 2 bytes it would round p − 1 at a confident label to nothing (p = 0.999
// is 1.0 in bf16), kept in f32 it costs 4 bytes per token and class — the largest activation of
// a language model's head (a 2,048-token sequence over a 50k vocabulary: 0.4 GB). The f32 form
// keeps the softmax, the logits would cost as much — unless the op makes none (return_softmax
// false: nothing reads it, the amp pass and the bf16 model builders say so).
absl::StatusOr<std::vector<Value*>> CrossEntropyGrad(Builder& b, const Operation& op,
                                                     const std::vector<Value*>& out_grads) {
  if (out_grads[1] == nullptr) return NoGrads(op);
  if (IsLowPrecisionFloat(op.operand(0)->type().dtype) || op.result(0)->type().num_elements() == 0) {
    return EmitGradOp(b, op, "cross_entropy_with_softmax_grad_from_logits",
                      {op.operand(1), op.operand(0), out_grads[1]}, {0});
  }
  return EmitGradOp(b, op, "cross_entropy_with_softmax_grad", {op.operand(1), op.result(0), out_grads[1]}, {0});
}

// --- fused_rope ----------------------------------------------------------------------------

// Checks the layout shared by fused_rope and its gradient: q, k?, v? are [batch, seq, heads,
// head_dim] ([seq, batch, ...] when time_major) with equal batch, seq and even head_dim; sin
// and cos are both present or both absent, shaped [S, head_dim] or [1, S, 1, head_dim], with
// S >= seq (S = the largest position when position_ids [batch, seq] is given). Returns the
// result types (an absent tensor gives f[0]).
absl::StatusOr<std::vector<TensorType>> RopeTypes(const TensorType* q, const TensorType* k, const TensorType* v,
                                                  const TensorType* sin, const TensorType* cos,
                                                  const TensorType* position_ids, const AttributeMap& attrs) {
  PDIST_ASSIGN_OR_RETURN(bool time_major, GetBool(attrs, "time_major"));
  if (q == nullptr || q->rank() != 4 || !IsFloatingPoint(q->dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat("q must be a float tensor [batch, seq, heads, head_dim], got ", q ? q->ToString() : "none"));
  }
  const int64_t batch = q->shape[time_major ? 1 : 0];
  const int64_t seq = q->shape[time_major ? 0 : 1];
  const int64_t head_dim = q->shape[3];
  if (head_dim % 2 != 0) return absl::InvalidArgumentError(absl::StrCat("head_dim ", head_dim, " must be even"));
  for (const TensorType* t : {k, v}) {
    if (t == nullptr) continue;
    if (t->rank() != 4 || t->dtype != q->dtype || t->shape[0] != q->shape[0] || t->shape[1] != q->shape[1] ||
        t->shape[3] != head_dim) {
      return absl::InvalidArgumentError(
          absl::StrCat("k and v must match q ", q->ToString(), " except in heads, got ", t->ToString()));
    }
  }
  if ((sin == nullptr) != (cos == nullptr)) return absl::InvalidArgumentError("sin and cos must be given together");
  if (sin != nullptr) {
    const bool ok2 = sin->rank() == 2 && sin->shape[1] == head_dim;
    const bool ok4 = sin->rank() == 4 && sin->shape[0] == 1 && sin->shape[2] == 1 && sin->shape[3] == head_dim;
    if (!(ok2 || ok4) || *sin != *cos || sin->dtype != q->dtype) {
      return absl::InvalidArgumentError(absl::StrCat("sin and cos must be equal ", std::string(DataTypeName(q->dtype)),
                                                     " tensors [S, ", head_dim, "] or [1, S, 1, ", head_dim, "], got ",
                                                     sin->ToString(), " and ", cos->ToString()));
    }
    if (position_ids == nullptr && sin->shape[sin->rank() == 2 ? 0 : 1] < seq) {
      return absl::InvalidArgumentError(
          absl::StrCat("sin/cos ", sin->ToString(), " cover fewer than seq = ", seq, " positions"));
    }
  }
  if (position_ids != nullptr &&
      (position_ids->dtype != DataType::kInt64 || position_ids->shape != Shape{batch, seq})) {
    return absl::InvalidArgumentError(
        absl::StrCat("position_ids must be i64[", batch, ",", seq, "], got ", position_ids->ToString()));
  }
  return std::vector<TensorType>{*q, k ? *k : EmptyOf(q->dtype), v ? *v : EmptyOf(q->dtype)};
}

// (q, k?, v?, sin?, cos?, position_ids?) → out_q, out_k, out_v.
absl::StatusOr<std::vector<TensorType>> RopeMeta(const InputTypes& in, const AttributeMap& attrs) {
  auto at = [&](size_t i) { return i < in.size() ? in[i] : nullptr; };
  return RopeTypes(at(0), at(1), at(2), at(3), at(4), at(5), attrs);
}

// (sin?, cos?, position_ids?, out_q_grad, out_k_grad?, out_v_grad?) → q_grad, k_grad, v_grad.
absl::StatusOr<std::vector<TensorType>> RopeGradMeta(const InputTypes& in, const AttributeMap& attrs) {
  auto at = [&](size_t i) { return i < in.size() ? in[i] : nullptr; };
  return RopeTypes(at(3), at(4), at(5), at(0), at(1), at(2), attrs);
}

// The rotation is linear in q, k and v: their gradients are the transposed rotation of the
// output gradients (fused_rope_grad). sin, cos and position_ids get no gradient.
absl::StatusOr<std::vector<Value*>> RopeGrad(Builder& b, const Operation& op, const std::vector<Value*>& out_grads) {
  if (out_grads[0] == nullptr && out_grads[1] == nullptr && out_grads[2] == nullptr) return NoGrads(op);
  auto operand = [&](size_t i) { return i < op.num_operands() ? op.operand(i) : nullptr; };
  std::vector<Value*> operands = {operand(3), operand(4), operand(5)};
  for (size_t i = 0; i < 3; ++i) {
    Value* g = nullptr;
    if (operand(i) != nullptr) {
      PDIST_ASSIGN_OR_RETURN(g, ops::OrZeros(b, out_grads[i], op.result(i)));
    }
    operands.push_back(g);
  }
  PDIST_ASSIGN_OR_RETURN(std::vector<Value*> results, b.Create("fused_rope_grad", operands, op.attrs()));
  std::vector<Value*> grads = NoGrads(op);
  for (size_t i = 0; i < 3; ++i) {
    if (operand(i) != nullptr) grads[i] = results[i];
  }
  return grads;
}

CostFn ElementwiseCostFn(double flops_per_element) {
  return [flops_per_element](const InputTypes& in, const std::vector<TensorType>& out, const AttributeMap&) {
    return ops::ElementwiseCost(in, out, flops_per_element);
  };
}

}  // namespace

absl::Status RegisterNnOps(OpRegistry& registry) {
  const spmd::SpmdRuleFns embedding_rule = spmd::EmbeddingRule();
  const spmd::SpmdRuleFns embedding_grad_rule = spmd::EmbeddingGradRule();
  const std::vector<AttrSpec> embedding_attrs = {{"padding_idx", int64_t{-1}}, {"sparse", false}};
  PDIST_RETURN_IF_ERROR(registry.Register(OpDef{
      .name = "embedding",
      .inputs = {{"x"}, {"weight"}},
      .outputs = {{"out"}},
      .attrs = embedding_attrs,
      .infer_meta = EmbeddingMeta,
      .grad = EmbeddingGrad,
      .cost = EmbeddingCost,
      .infer_spmd = embedding_rule.infer,
      .infer_spmd_reverse = embedding_rule.reverse,
      .describe_spmd = embedding_rule.describe,
      .index_operands = {{.operand = 0, .into = 1, .dim = 0}},
  }));
  PDIST_RETURN_IF_ERROR(registry.Register(OpDef{
      .name = "embedding_grad",
      .inputs = {{"x"}, {"weight"}, {"out_grad"}},
      .outputs = {{"weight_grad"}},
      .attrs = embedding_attrs,
      .infer_meta = EmbeddingGradMeta,
      .grad_kind = GradKind::kGradientOp,
      .grad = nullptr,
      .cost = EmbeddingGradCost,
      .infer_spmd = embedding_grad_rule.infer,
      .infer_spmd_reverse = embedding_grad_rule.reverse,
      .describe_spmd = embedding_grad_rule.describe,
  }));

  // numeric_stable_mode is accepted for Paddle compatibility; the kernel is always stable.
  // return_softmax is pdist's (flash_attn's name): false makes the softmax result an empty f[0],
  // for programs that never read it.
  const spmd::SpmdRuleFns ce_rule = spmd::CrossEntropyRule();
  const spmd::SpmdRuleFns ce_grad_rule = spmd::CrossEntropyGradRule();
  const std::vector<AttrSpec> ce_attrs = {{"soft_label", false},
                                          {"use_softmax", true},
                                          {"numeric_stable_mode", true},
                                          {"ignore_index", int64_t{-100}},
                                          {"axis", int64_t{-1}},
                                          {"return_softmax", true}};
  PDIST_RETURN_IF_ERROR(registry.Register(OpDef{
      .name = "cross_entropy_with_softmax",
      .inputs = {{"logits"}, {"label"}},
      .outputs = {{"softmax"}, {"loss"}},
      .attrs = ce_attrs,
      .infer_meta = CrossEntropyMeta,
      .grad = CrossEntropyGrad,
      .cost = ElementwiseCostFn(5),  // max, subtract, exp, sum, divide per logit
      .infer_spmd = ce_rule.infer,
      .infer_spmd_reverse = ce_rule.reverse,
      .describe_spmd = ce_rule.describe,
      .index_operands = {{.operand = 1, .into = 0, .dim_attr = "axis", .also_allowed_attr = "ignore_index"}},
  }));
  PDIST_RETURN_IF_ERROR(registry.Register(OpDef{
      .name = "cross_entropy_with_softmax_grad",
      .inputs = {{"label"}, {"softmax"}, {"loss_grad"}},
      .outputs = {{"logits_grad"}},
      .attrs = ce_attrs,
      .infer_meta = CrossEntropyGradMeta,
      .grad_kind = GradKind::kGradientOp,
      .grad = nullptr,
      .cost = ElementwiseCostFn(2),
      .infer_spmd = ce_grad_rule.infer,
      .infer_spmd_reverse = ce_grad_rule.reverse,
      .describe_spmd = ce_grad_rule.describe,
  }));
  const spmd::SpmdRuleFns ce_logits_grad_rule = spmd::CrossEntropyGradFromLogitsRule();
  PDIST_RETURN_IF_ERROR(registry.Register(OpDef{
      .name = "cross_entropy_with_softmax_grad_from_logits",
      .inputs = {{"label"}, {"logits"}, {"loss_grad"}},
      .outputs = {{"logits_grad"}},
      .attrs = ce_attrs,
      .infer_meta = CrossEntropyGradMeta,
      .grad_kind = GradKind::kGradientOp,
      .grad = nullptr,
      .cost = ElementwiseCostFn(7),  // the forward's softmax again, then the gradient
      .infer_spmd = ce_logits_grad_rule.infer,
      .infer_spmd_reverse = ce_logits_grad_rule.reverse,
      .describe_spmd = ce_logits_grad_rule.describe,
      .overwrites_dying_operand = {{0, 1}},  // the gradient over the logits (row stats read first)
  }));

  // Paddle's defaults. use_neox_rotary_style = true rotates adjacent pairs (x0,x1), (x2,x3), …;
  // false rotates the two halves (x_i, x_{i+d/2}) — Paddle's naming, the reverse of GPT-NeoX's.
  const spmd::SpmdRuleFns rope_rule = spmd::FusedRopeRule();
  const spmd::SpmdRuleFns rope_grad_rule = spmd::FusedRopeGradRule();
  const std::vector<AttrSpec> rope_attrs = {
      {"use_neox_rotary_style", true}, {"time_major", false}, {"rotary_emb_base", 10000.0}};
  PDIST_RETURN_IF_ERROR(registry.Register(OpDef{
      .name = "fused_rope",
      .inputs = {{"q"}, {"k", true}, {"v", true}, {"sin", true}, {"cos", true}, {"position_ids", true}},
      .outputs = {{"out_q"}, {"out_k"}, {"out_v"}},
      .attrs = rope_attrs,
      .infer_meta = RopeMeta,
      .grad = RopeGrad,
      .cost = ElementwiseCostFn(3),  // x*cos + rot(x)*sin
      .infer_spmd = rope_rule.infer,
      .infer_spmd_reverse = rope_rule.reverse,
      .describe_spmd = rope_rule.describe,
  }));
  PDIST_RETURN_IF_ERROR(registry.Register(OpDef{
      .name = "fused_rope_grad",
      .inputs = {{"sin", true},
                 {"cos", true},
                 {"position_ids", true},
                 {"out_q_grad"},
                 {"out_k_grad", true},
                 {"out_v_grad", true}},
      .outputs = {{"q_grad"}, {"k_grad"}, {"v_grad"}},
      .attrs = rope_attrs,
      .infer_meta = RopeGradMeta,
      .grad_kind = GradKind::kGradientOp,
      .grad = nullptr,
      .cost = ElementwiseCostFn(3),
      .infer_spmd = rope_grad_rule.infer,
      .infer_spmd_reverse = rope_grad_rule.reverse,
      .describe_spmd = rope_grad_rule.describe,
  }));
  return RegisterAttentionOps(registry);
}

}  // namespace pdist::ir
