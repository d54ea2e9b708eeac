// SPMD rules of embedding, cross_entropy_with_softmax and fused_rope, with their gradients
// (Paddle a.10, a.11; fused_rope as flash_attn's inputs: batch and heads shardable).
//
//   embedding ids i64[8,32], weight [V,H]:       "ab,jk->abk  j→Partial"   (vocab-parallel)
//   embedding_grad:                              "ab,jk,abk->jk  ab→Partial"
//   cross_entropy_with_softmax hard label, last axis:
//                                                "abk,ab1->abk,ab1  loss: k→reduced in kernel"
//   fused_rope q [b,s,h,d]:                      "bshd,bshd,bshd,sd,sd,bs->bshd,bshd,bshd  sd→Replicate"
#include <numeric>

#include "absl/strings/str_cat.h"
#include "ir/spmd/einsum.h"
#include "ir/spmd/nn_rule.h"
#include "ir/spmd/rules_nn.h"
#include "ir/status.h"

namespace pdist::ir::spmd {
namespace {

// Letters for `shape` from a..z without `reserved`, '1' at size-1 axes.
absl::StatusOr<std::string> LettersWithout(const Shape& shape, const std::string& reserved) {
  std::string alphabet;
  for (char c = 'a'; c <= 'z'; ++c) {
    if (reserved.find(c) == std::string::npos) alphabet.push_back(c);
  }
  if (shape.size() > alphabet.size()) {
    return absl::InvalidArgumentError(absl::StrCat("rank of ", ShapeToString(shape), " exceeds the rule's alphabet"));
  }
  return MarkSizeOne(alphabet.substr(0, shape.size()), shape);
}

// --- embedding -----------------------------------------------------------------------------

// ids x "ab", weight "jk" (vocab j, hidden k), out "abk". A vocab-sharded table looks up only its
// rows: out is Partial on j's mesh dim (the kernel zeroes ids outside the local rows). With a
// padding_idx the table stays whole: the local kernel would need that row's local index.
NnRuleBuilder EmbeddingAxes(bool grad) {
  return [grad](const std::vector<Shape>& in, const AttributeMap& attrs) -> absl::StatusOr<NnRule> {
    PDIST_ASSIGN_OR_RETURN(const Shape x, RequireShape(in, 0, "x"));
    PDIST_ASSIGN_OR_RETURN(const Shape weight, RequireShape(in, 1, "weight", 2));
    PDIST_ASSIGN_OR_RETURN(int64_t padding_idx, IntAttr(attrs, "padding_idx", -1));
    PDIST_ASSIGN_OR_RETURN(const std::string ids, LettersWithout(x, "jk"));
    const std::string table = MarkSizeOne("jk", weight);
    const std::string out = ids + table.substr(1);
    NnRule rule;
    EinsumRule& e = rule.einsum;
    if (grad) {
      // weight_grad = Σ over the ids' axes of onehot(ids) ⊗ out_grad: Partial where they are sharded.
      e.inputs = {ids, table, out};
      e.input_names = {"x", "weight", "out_grad"};
      e.outputs = {table};
      e.output_names = {"weight_grad"};
      e.partial = PartialPolicy::Linear({2});
    } else {
      e.inputs = {ids, table};
      e.input_names = {"x", "weight"};
      e.outputs = {out};
      e.output_names = {"out"};
      e.partial = PartialPolicy::Linear({1});  // a row lookup is linear in the table
    }
    if (padding_idx != -1) e.replicated = UniqueLetters(table.substr(0, 1));
    return rule;
  };
}

// --- cross_entropy_with_softmax ------------------------------------------------------------

// logits "abk" (k the softmax axis), hard label and loss "ab1", soft label "abk". The softmax axis
// may stay sharded only for a hard label on the last axis with use_softmax (vocab-parallel, as
// Paddle's static rule and c_softmax_with_cross_entropy): the kernel then all-reduces the row max,
// the sum of exponentials and the label's logit over k's mesh dim, so softmax stays sharded on k
// and the loss is whole, not Partial. Otherwise k is replicated.
NnRuleBuilder CrossEntropyAxes(bool grad, const char* classes_name) {
  return [grad, classes_name](const std::vector<Shape>& in, const AttributeMap& attrs) -> absl::StatusOr<NnRule> {
    const size_t logits_index = grad ? 1 : 0;
    const size_t label_index = grad ? 0 : 1;
    PDIST_ASSIGN_OR_RETURN(const Shape logits, RequireShape(in, logits_index, classes_name));
    if (logits.empty()) return absl::InvalidArgumentError("logits must have rank >= 1");
    const auto rank = static_cast<int64_t>(logits.size());
    PDIST_ASSIGN_OR_RETURN(const Shape label, RequireShape(in, label_index, "label", rank));
    PDIST_ASSIGN_OR_RETURN(int64_t axis, IntAttr(attrs, "axis", -1));
    PDIST_ASSIGN_OR_RETURN(axis, NormalizeAxis(axis, rank, "axis"));
    PDIST_ASSIGN_OR_RETURN(bool soft_label, BoolAttr(attrs, "soft_label", false));
    PDIST_ASSIGN_OR_RETURN(bool use_softmax, BoolAttr(attrs, "use_softmax", true));

    // The other axes take a, b, ... in order; the softmax axis is k.
    Shape others = logits;
    others.erase(others.begin() + axis);
    PDIST_ASSIGN_OR_RETURN(std::string letters, LettersWithout(others, "k"));
    letters.insert(letters.begin() + axis, logits[static_cast<size_t>(axis)] == 1 ? '1' : 'k');
    std::string loss = letters;
    loss[static_cast<size_t>(axis)] = '1';
    const std::string label_letters = soft_label ? letters : loss;
    const bool vocab_parallel = !soft_label && use_softmax && axis == rank - 1;

    NnRule rule;
    EinsumRule& e = rule.einsum;
    if (grad) {
      // logits_grad = (softmax - onehot(label)) · loss_grad, elementwise on softmax's layout
      // (the _from_logits form recomputes the softmax from the logits first).
      e.inputs = {label_letters, letters, loss};
      e.input_names = {"label", classes_name, "loss_grad"};
      e.outputs = {letters};
      e.output_names = {"logits_grad"};
      e.partial = PartialPolicy::Linear({2});
    } else {
      PDIST_ASSIGN_OR_RETURN(bool return_softmax, BoolAttr(attrs, "return_softmax", true));
      e.inputs = {letters, label_letters};
      e.input_names = {"logits", "label"};
      e.outputs = {return_softmax ? letters : "_", loss};
      e.output_names = {"softmax", "loss"};
      if (!return_softmax) {  // an empty f[0]
        Shape loss_shape = logits;
        loss_shape[static_cast<size_t>(axis)] = 1;
        e.output_shapes = {Shape{0}, loss_shape};
      }
    }
    if (!vocab_parallel) {
      e.replicated = UniqueLetters(letters.substr(static_cast<size_t>(axis), 1));
    } else if (!grad && letters[static_cast<size_t>(axis)] == 'k') {
      rule.whole_outputs = {1};
      rule.note = "loss: k→reduced in kernel";
    }
    return rule;
  };
}

// --- fused_rope ----------------------------------------------------------------------------

// Operand positions of q, k, v (or their output gradients), sin, cos and position_ids.
struct RopeSlots {
  size_t q, k, v, sin, cos, position_ids;
  bool grad;
};

// q, k, v "bshd" ("sbhd" when time_major): every tensor rotates per (batch, head), so batch and
// heads may be sharded (one letter h for q's and k's heads, which may differ in number); seq and
// head_dim are replicated (sin and cos are indexed by global position). sin, cos "sd" or "1s1d";
// position_ids "bs".
NnRuleBuilder RopeAxes(RopeSlots slots) {
  return [slots](const std::vector<Shape>& in, const AttributeMap& attrs) -> absl::StatusOr<NnRule> {
    const char* q_name = slots.grad ? "out_q_grad" : "q";
    PDIST_ASSIGN_OR_RETURN(const Shape q, RequireShape(in, slots.q, q_name, 4));
    PDIST_ASSIGN_OR_RETURN(bool time_major, BoolAttr(attrs, "time_major", false));
    const std::string layout = time_major ? "sbhd" : "bshd";
    auto shape_at = [&](size_t i) { return i < in.size() ? in[i] : Shape{0}; };
    // Each operand with its letters at rank 4 and at rank 2 ("" where that rank is invalid).
    struct Operand {
      size_t index;
      const char* name;
      std::string four, two;
    };
    const std::vector<Operand> operands = {{slots.q, q_name, layout, ""},
                                           {slots.k, slots.grad ? "out_k_grad" : "k", layout, ""},
                                           {slots.v, slots.grad ? "out_v_grad" : "v", layout, ""},
                                           {slots.sin, "sin", "1s1d", "sd"},
                                           {slots.cos, "cos", "1s1d", "sd"},
                                           {slots.position_ids, "position_ids", "", "bs"}};

    NnRule rule;
    EinsumRule& e = rule.einsum;
    const size_t count = std::min<size_t>(in.size(), operands.size());
    e.inputs.assign(count, "_");
    e.input_names.assign(operands.size(), "");
    for (const Operand& op : operands) {
      e.input_names[op.index] = op.name;
      const Shape shape = shape_at(op.index);
      if (IsAbsentShape(shape)) continue;
      const std::string letters = shape.size() == 4 ? op.four : shape.size() == 2 ? op.two : "";
      if (letters.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(op.name, " (input ", op.index, ") has an unexpected shape ", ShapeToString(shape)));
      }
      e.inputs[op.index] = MarkSizeOne(letters, shape);
    }
    for (size_t t = 0; t < 3; ++t) {
      const size_t index = operands[t].index;
      e.outputs.push_back(index < count ? e.inputs[index] : "_");
      e.output_shapes.push_back(shape_at(index));
    }
    e.output_names = slots.grad ? std::vector<std::string>{"q_grad", "k_grad", "v_grad"}
                                : std::vector<std::string>{"out_q", "out_k", "out_v"};
    e.replicated = "sd";
    // Each result rotates its own input linearly: Partial passes when q, k, v are Partial alike.
    std::vector<int> linear;
    for (size_t t = 0; t < 3; ++t) {
      if (e.outputs[t] != "_") linear.push_back(static_cast<int>(operands[t].index));
    }
    e.partial = PartialPolicy::Linear(std::move(linear), PartialPolicy::Mode::kAlike);
    // Heads shard together; with fewer k/v heads than q heads the mesh dim must divide them all,
    // or k/v would be split unevenly (flash_attn needs that too).
    int64_t heads = q[2];
    for (size_t t = 1; t < 3; ++t) {
      const Shape shape = shape_at(operands[t].index);
      if (shape.size() == 4 && shape[2] > 1) heads = std::gcd(heads, shape[2]);
    }
    if (heads != q[2]) rule.must_divide = {{'h', heads}};
    return rule;
  };
}

}  // namespace

SpmdRuleFns EmbeddingRule() { return NnRuleFns("embedding", EmbeddingAxes(false)); }
SpmdRuleFns EmbeddingGradRule() { return NnRuleFns("embedding_grad", EmbeddingAxes(true)); }
SpmdRuleFns CrossEntropyRule() { return NnRuleFns("cross_entropy_with_softmax", CrossEntropyAxes(false, "logits")); }
SpmdRuleFns CrossEntropyGradRule() {
  return NnRuleFns("cross_entropy_with_softmax_grad", CrossEntropyAxes(true, "softmax"));
}
SpmdRuleFns CrossEntropyGradFromLogitsRule() {
  return NnRuleFns("cross_entropy_with_softmax_grad_from_logits", CrossEntropyAxes(true, "logits"));
}
SpmdRuleFns FusedRopeRule() { return NnRuleFns("fused_rope", RopeAxes({0, 1, 2, 3, 4, 5, false})); }
SpmdRuleFns FusedRopeGradRule() { return NnRuleFns("fused_rope_grad", RopeAxes({3, 4, 5, 0, 1, 2, true})); }

}  // namespace pdist::ir::spmd
