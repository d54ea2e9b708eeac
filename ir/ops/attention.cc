// flash_attn (alias flash_attention) and flash_attn_grad: scaled dot-product attention on
// [batch, seq, heads, head_dim] tensors, as Paddle's flash_attn op.
//
//   %o, %p, %lse, %so = flash_attn(%q, %k, %v) {causal = true, dropout = 0.0, ...}
//        : f32[2,128,8,64], f32[0], f32[2,8,128], i64[2]
//
// q [b, sq, hq, d], k [b, sk, hk, d], v [b, sk, hk, dv] with hq a multiple of hk (grouped-query
// attention). out [b, sq, hq, dv]; softmax [b, hq, sq, sk] when return_softmax, else f[0];
// softmax_lse [b, hq, sq] (the logsumexp of each row of scaled scores, in the type the op
// computes in: f32 for bf16/f16 q, as Paddle's and FlashAttention's kernels keep it, since the
// backward rebuilds the probabilities as exp(s - lse) and a bf16 lse (8 bits of mantissa, a
// step of 1/16 near 10) would scale each row's by up to 3%); seed_offset i64[2] (the dropout
// RNG state).
// attn_mask is additive, [b|1, hq|1, sq, sk]. With causal, query i sees keys j <= i + sk - sq
// (bottom-right aligned, as flash-attention 2).
#include "absl/strings/str_cat.h"
#include "ir/op_def.h"
#include "ir/ops/op_helpers.h"
#include "ir/spmd/rules_nn.h"
#include "ir/status.h"

namespace pdist::ir {
namespace {

struct AttentionDims {
  int64_t batch, seq_q, seq_k, heads_q, heads_k, head_dim, v_dim;
};

// Validates q, k, v (inputs 0-2) and the optional additive mask at `mask_index`.
absl::StatusOr<AttentionDims> CheckAttention(const InputTypes& in, size_t mask_index) {
  for (size_t i = 0; i < 3; ++i) {
    const char* name = i == 0 ? "q" : i == 1 ? "k" : "v";
    PDIST_RETURN_IF_ERROR(ops::ExpectFloat(in, i, name));
    PDIST_RETURN_IF_ERROR(ops::ExpectRank(in, i, 4, absl::StrCat(name, " [batch, seq, heads, head_dim]")));
  }
  const Shape& q = in[0]->shape;
  const Shape& k = in[1]->shape;
  const Shape& v = in[2]->shape;
  const AttentionDims dims{q[0], q[1], k[1], q[2], k[2], q[3], v[3]};
  if (in[1]->dtype != in[0]->dtype || in[2]->dtype != in[0]->dtype || k[0] != q[0] || v[0] != q[0] || k[3] != q[3] ||
      v[1] != k[1] || v[2] != k[2]) {
    return absl::InvalidArgumentError(absl::StrCat("q ", in[0]->ToString(), ", k ", in[1]->ToString(), ", v ",
                                                   in[2]->ToString(),
                                                   " must share dtype and batch, k and q "
                                                   "head_dim, k and v seq and heads"));
  }
  if (dims.heads_k == 0 || dims.heads_q % dims.heads_k != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("q heads ", dims.heads_q, " must be a multiple of k heads ", dims.heads_k));
  }
  const TensorType* mask = mask_index < in.size() ? in[mask_index] : nullptr;
  if (mask != nullptr) {
    const Shape& m = mask->shape;
    if (mask->dtype != in[0]->dtype || m.size() != 4 || (m[0] != 1 && m[0] != dims.batch) ||
        (m[1] != 1 && m[1] != dims.heads_q) || m[2] != dims.seq_q || m[3] != dims.seq_k) {
      return absl::InvalidArgumentError(absl::StrCat("attn_mask must be ", std::string(DataTypeName(in[0]->dtype)), "[",
                                                     dims.batch, "|1, ", dims.heads_q, "|1, ", dims.seq_q, ", ",
                                                     dims.seq_k, "], got ", mask->ToString()));
    }
  }
  return dims;
}

// (q, k, v, fixed_seed_offset?, attn_mask?) → out, softmax, softmax_lse, seed_offset.
absl::StatusOr<std::vector<TensorType>> FlashAttnMeta(const InputTypes& in, const AttributeMap& attrs) {
  PDIST_ASSIGN_OR_RETURN(AttentionDims d, CheckAttention(in, 4));
  if (in.size() > 3 && in[3] != nullptr && *in[3] != TensorType{{2}, DataType::kInt64}) {
    return absl::InvalidArgumentError(absl::StrCat("fixed_seed_offset must be i64[2], got ", in[3]->ToString()));
  }
  PDIST_ASSIGN_OR_RETURN(bool return_softmax, GetBool(attrs, "return_softmax"));
  const DataType dtype = in[0]->dtype;
  return std::vector<TensorType>{
      {{d.batch, d.seq_q, d.heads_q, d.v_dim}, dtype},
      {return_softmax ? Shape{d.batch, d.heads_q, d.seq_q, d.seq_k} : Shape{0}, dtype},
      {{d.batch, d.heads_q, d.seq_q}, ComputeDtype(dtype)},
      {{2}, DataType::kInt64},
  };
}

// (q, k, v, out, softmax_lse, seed_offset?, attn_mask?, out_grad) → q_grad, k_grad, v_grad.
absl::StatusOr<std::vector<TensorType>> FlashAttnGradMeta(const InputTypes& in, const AttributeMap& attrs) {
  PDIST_ASSIGN_OR_RETURN(AttentionDims d, CheckAttention(in, 6));
  const TensorType out{{d.batch, d.seq_q, d.heads_q, d.v_dim}, in[0]->dtype};
  const TensorType lse{{d.batch, d.heads_q, d.seq_q}, ComputeDtype(in[0]->dtype)};
  if (*in[3] != out || *in[7] != out) {
    return absl::InvalidArgumentError(absl::StrCat("out and out_grad must be ", out.ToString(), ", got ",
                                                   in[3]->ToString(), " and ", in[7]->ToString()));
  }
  if (*in[4] != lse) {
    return absl::InvalidArgumentError(
        absl::StrCat("softmax_lse must be ", lse.ToString(), ", got ", in[4]->ToString()));
  }
  return std::vector<TensorType>{*in[0], *in[1], *in[2]};
}

absl::StatusOr<std::vector<Value*>> FlashAttnGrad(Builder& b, const Operation& op,
                                                  const std::vector<Value*>& out_grads) {
  // softmax, softmax_lse and seed_offset are auxiliary: only out's gradient flows back.
  if (out_grads[0] == nullptr) return std::vector<Value*>(op.num_operands(), nullptr);
  Value* mask = op.num_operands() > 4 ? op.operand(4) : nullptr;
  const AttributeMap grad_attrs = {{"dropout", op.attrs().at("dropout")}, {"causal", op.attrs().at("causal")}};
  return ops::EmitGradOp(
      b, op, "flash_attn_grad",
      {op.operand(0), op.operand(1), op.operand(2), op.result(0), op.result(2), op.result(3), mask, out_grads[0]},
      {0, 1, 2}, grad_attrs);
}

// Forward FLOPs are those of q·kᵀ and p·v: 2·b·hq·sq·sk·(d + dv), i.e. 4·b·h·s²·d when dv = d.
// The backward pass costs `factor` = 2.5 times that: it recomputes q·kᵀ and forms dv, dp, dq and
// dk (five products instead of two). A causal mask halves both (square case). Model FLOPs count
// neither the mask nor the recompute: the forward's full products, the backward twice them.
CostFn AttentionCost(double factor) {
  return [factor](const InputTypes& in, const std::vector<TensorType>& out, const AttributeMap& attrs) {
    const Shape& q = in[0]->shape;
    const Shape& k = in[1]->shape;
    const Shape& v = in[2]->shape;
    const double forward = 2.0 * static_cast<double>(q[0] * q[2] * q[1] * k[1]) * static_cast<double>(q[3] + v[3]);
    absl::StatusOr<bool> causal = GetBool(attrs, "causal");
    const double causal_factor = causal.ok() && *causal ? 0.5 : 1.0;
    return OpCost{.flops = forward * factor * causal_factor,
                  .bytes = ops::TotalBytes(in, out),
                  .model_flops = forward * (factor == 1.0 ? 1.0 : 2.0)};
  };
}

OpDef FlashAttnDef(const std::string& name) {
  const spmd::SpmdRuleFns rule = spmd::FlashAttnRule(name);
  return OpDef{
      .name = name,
      .inputs = {{"q"}, {"k"}, {"v"}, {"fixed_seed_offset", true}, {"attn_mask", true}},
      .outputs = {{"out"}, {"softmax"}, {"softmax_lse"}, {"seed_offset"}},
      .attrs = {{"dropout", 0.0},
                {"causal", false},
                {"return_softmax", false},
                {"is_test", false},
                {"rng_name", std::string()}},
      .infer_meta = FlashAttnMeta,
      .grad = FlashAttnGrad,
      .cost = AttentionCost(1.0),
      .infer_spmd = rule.infer,
      .infer_spmd_reverse = rule.reverse,
      .describe_spmd = rule.describe,
      .compute_bound = true,
  };
}

}  // namespace

// Called by RegisterNnOps. `flash_attention` is the name Paddle's SPMD rule and some exported
// programs use; both names share one definition and one gradient op.
absl::Status RegisterAttentionOps(OpRegistry& registry) {
  PDIST_RETURN_IF_ERROR(registry.Register(FlashAttnDef("flash_attn")));
  PDIST_RETURN_IF_ERROR(registry.Register(FlashAttnDef("flash_attention")));
  const spmd::SpmdRuleFns grad_rule = spmd::FlashAttnGradRule();
  return registry.Register(OpDef{
      .name = "flash_attn_grad",
      .inputs =
          {{"q"}, {"k"}, {"v"}, {"out"}, {"softmax_lse"}, {"seed_offset", true}, {"attn_mask", true}, {"out_grad"}},
      .outputs = {{"q_grad"}, {"k_grad"}, {"v_grad"}},
      .attrs = {{"dropout", 0.0}, {"causal", false}},
      .infer_meta = FlashAttnGradMeta,
      .grad_kind = GradKind::kGradientOp,
      .grad = nullptr,
      .cost = AttentionCost(2.5),
      .infer_spmd = grad_rule.infer,
      .infer_spmd_reverse = grad_rule.reverse,
      .describe_spmd = grad_rule.describe,
  });
}

}  // namespace pdist::ir
