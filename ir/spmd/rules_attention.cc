// SPMD rules of flash_attn (alias flash_attention) and flash_attn_grad (Paddle a.12).
//
//   q [b,sq,h,d], k [b,sk,h,d], v [b,sk,h,dv], fixed_seed_offset [2], attn_mask [b,h,sq,sk]:
//   "bshd,bthd,bthe,z,bhst->bshe,_,bhs,z  stdez→Replicate"
//
// Batch (b) and heads (h) may be sharded; the sequences (s, t) and head dims (d, e) are replicated:
// softmax runs over t, and q·kᵀ contracts d. With grouped-query attention (k has fewer heads than
// q, but more than one) the heads stay sharded only when their mesh dim divides k's heads, so that
// each rank's query heads meet exactly their own key/value heads. seed_offset is the dropout RNG
// state, replicated; softmax is an empty f[0] unless return_softmax.
#include "absl/strings/str_cat.h"
#include "ir/spmd/nn_rule.h"
#include "ir/spmd/rules_nn.h"
#include "ir/status.h"

namespace pdist::ir::spmd {
namespace {

struct AttentionLayout {
  std::string q, k, v, out, softmax, lse;
  std::string mask{"_"};
  Shape out_shape, softmax_shape, lse_shape;
};

// Letters of q, k, v (operands 0-2) and the optional mask at `mask_index`; fills the rule's
// replicated letters and the GQA divisibility constraint.
absl::StatusOr<AttentionLayout> Layout(const std::vector<Shape>& in, size_t mask_index, NnRule& rule) {
  PDIST_ASSIGN_OR_RETURN(const Shape q, RequireShape(in, 0, "q", 4));
  PDIST_ASSIGN_OR_RETURN(const Shape k, RequireShape(in, 1, "k", 4));
  PDIST_ASSIGN_OR_RETURN(const Shape v, RequireShape(in, 2, "v", 4));
  AttentionLayout l;
  l.out_shape = {q[0], q[1], q[2], v[3]};
  l.softmax_shape = {q[0], q[2], q[1], k[1]};
  l.lse_shape = {q[0], q[2], q[1]};
  l.q = MarkSizeOne("bshd", q);
  l.k = MarkSizeOne("bthd", k);
  l.v = MarkSizeOne("bthe", v);
  l.out = MarkSizeOne("bshe", l.out_shape);
  l.softmax = MarkSizeOne("bhst", l.softmax_shape);
  l.lse = MarkSizeOne("bhs", l.lse_shape);
  if (mask_index < in.size() && !IsAbsentShape(in[mask_index])) {
    PDIST_ASSIGN_OR_RETURN(const Shape mask, RequireShape(in, mask_index, "attn_mask", 4));
    l.mask = MarkSizeOne("bhst", mask);
  }
  rule.einsum.replicated = "stdez";
  if (q[2] != k[2] && k[2] > 1) rule.must_divide = {{'h', k[2]}};
  return l;
}

// An optional operand: its letters when present, "_" when absent.
std::string Optional(const std::vector<Shape>& in, size_t index, const std::string& letters) {
  return index < in.size() && !IsAbsentShape(in[index]) ? letters : "_";
}

// Keeps the first in.size() entries (an op built without its trailing optional operands).
std::vector<std::string> Prefix(std::vector<std::string> all, size_t n) {
  if (all.size() > n) all.resize(n);
  return all;
}

// (q, k, v, fixed_seed_offset?, attn_mask?) → out, softmax, softmax_lse, seed_offset.
absl::StatusOr<NnRule> FlashAttnAxes(const std::vector<Shape>& in, const AttributeMap& attrs) {
  NnRule rule;
  PDIST_ASSIGN_OR_RETURN(const AttentionLayout l, Layout(in, 4, rule));
  PDIST_ASSIGN_OR_RETURN(bool return_softmax, BoolAttr(attrs, "return_softmax", false));
  EinsumRule& e = rule.einsum;
  e.inputs = Prefix({l.q, l.k, l.v, Optional(in, 3, "z"), l.mask}, in.size());
  e.input_names = {"q", "k", "v", "fixed_seed_offset", "attn_mask"};
  e.outputs = {l.out, return_softmax ? l.softmax : "_", l.lse, "z"};
  e.output_names = {"out", "softmax", "softmax_lse", "seed_offset"};
  e.output_shapes = {l.out_shape, return_softmax ? l.softmax_shape : Shape{0}, l.lse_shape, {2}};
  rule.whole_outputs = {3};
  return rule;
}

// (q, k, v, out, softmax_lse, seed_offset?, attn_mask?, out_grad) → q_grad, k_grad, v_grad.
absl::StatusOr<NnRule> FlashAttnGradAxes(const std::vector<Shape>& in, const AttributeMap&) {
  NnRule rule;
  PDIST_ASSIGN_OR_RETURN(const AttentionLayout l, Layout(in, 6, rule));
  PDIST_RETURN_IF_ERROR(RequireShape(in, 7, "out_grad", 4).status());
  EinsumRule& e = rule.einsum;
  e.inputs = Prefix({l.q, l.k, l.v, l.out, l.lse, Optional(in, 5, "z"), l.mask, l.out}, in.size());
  e.input_names = {"q", "k", "v", "out", "softmax_lse", "seed_offset", "attn_mask", "out_grad"};
  e.outputs = {l.q, l.k, l.v};
  e.output_names = {"q_grad", "k_grad", "v_grad"};
  e.partial = PartialPolicy::Linear({7});  // dq, dk, dv are linear in out_grad
  e.output_shapes = {in[0], in[1], in[2]};
  return rule;
}

}  // namespace

SpmdRuleFns FlashAttnRule(const std::string& op) { return NnRuleFns(op, FlashAttnAxes); }
SpmdRuleFns FlashAttnGradRule() { return NnRuleFns("flash_attn_grad", FlashAttnGradAxes); }

}  // namespace pdist::ir::spmd
