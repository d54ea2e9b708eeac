// SPMD rules of softmax, log_softmax, layer_norm, rms_norm and their gradients (Paddle a.8, a.9).
//
//   softmax x f32[8,32,64], axis = -1:            "abc->abc  c→Replicate"
//   layer_norm x f32[8,32,64], begin_norm_axis 2: "abc,c,c->abc,ab,ab  c→Replicate"
//
// The normalised axes are replicated: a sharded one would normalise each shard on its own.
// The statistics (mean, variance, invvar) are shaped x.shape[:begin_norm_axis], so every
// leading axis keeps its sharding — the batch over dp and the sequence over mp at once, which
// sequence parallelism needs. Gradients of scale and bias sum over the leading axes: Partial
// where they are sharded. The gradients align their inputs as Paddle's (AlignDimsSharding).
#include "absl/strings/str_cat.h"
#include "ir/spmd/nn_rule.h"
#include "ir/spmd/rules_nn.h"
#include "ir/status.h"

namespace pdist::ir::spmd {
namespace {

// --- softmax / log_softmax -----------------------------------------------------------------

// (x) → out, or (out, out_grad) → x_grad: every tensor shaped like x, the axis replicated.
NnRuleBuilder SoftmaxAxes(bool grad) {
  return [grad](const std::vector<Shape>& in, const AttributeMap& attrs) -> absl::StatusOr<NnRule> {
    PDIST_ASSIGN_OR_RETURN(const Shape x, RequireShape(in, 0, grad ? "out" : "x"));
    PDIST_ASSIGN_OR_RETURN(int64_t axis, IntAttr(attrs, "axis", -1));
    const std::string letters = MarkSizeOne(Letters(static_cast<int64_t>(x.size())), x);
    NnRule rule;
    EinsumRule& e = rule.einsum;
    e.inputs = grad ? std::vector<std::string>{letters, letters} : std::vector<std::string>{letters};
    e.input_names = grad ? std::vector<std::string>{"out", "out_grad"} : std::vector<std::string>{"x"};
    e.outputs = {letters};
    e.output_names = {grad ? "x_grad" : "out"};
    if (grad) e.partial = PartialPolicy::Linear({1});  // x_grad = out·(g - Σ out·g): linear in g
    if (!x.empty()) {
      PDIST_ASSIGN_OR_RETURN(axis, NormalizeAxis(axis, static_cast<int64_t>(x.size()), "axis"));
      e.replicated = UniqueLetters(letters.substr(static_cast<size_t>(axis), 1));
    }
    return rule;
  };
}

// --- layer_norm / rms_norm -----------------------------------------------------------------

// The role of each operand and result of a norm op: 'x' shaped like x, 's' a statistic (x's leading axes),
// 'w' the scale, 'b' the bias (as a result, 'w' / 'b' is that gradient).
struct NormSignature {
  std::string inputs;
  std::vector<std::string> input_names;
  std::string outputs;
  std::vector<std::string> output_names;
  bool grad = false;
};

NnRuleBuilder NormAxes(NormSignature sig) {
  return [sig](const std::vector<Shape>& in, const AttributeMap& attrs) -> absl::StatusOr<NnRule> {
    PDIST_ASSIGN_OR_RETURN(const Shape x, RequireShape(in, sig.inputs.find('x'), "x"));
    if (x.empty()) return absl::InvalidArgumentError("x must have rank >= 1");
    PDIST_ASSIGN_OR_RETURN(int64_t begin, IntAttr(attrs, "begin_norm_axis", 1));
    PDIST_ASSIGN_OR_RETURN(begin, NormalizeAxis(begin, static_cast<int64_t>(x.size()), "begin_norm_axis"));
    const std::string letters = MarkSizeOne(Letters(static_cast<int64_t>(x.size())), x);
    const std::string lead = letters.substr(0, static_cast<size_t>(begin));
    const std::string norm = letters.substr(static_cast<size_t>(begin));
    const Shape x_norm(x.begin() + begin, x.end());

    // Letters and shape per role. A parameter laid out like x's normalised axes shares their
    // letters; any other layout (one flattened axis) is all '1': replicated either way.
    std::map<char, std::pair<std::string, Shape>> roles = {
        {'x', {letters, x}}, {'s', {lead, Shape(x.begin(), x.begin() + begin)}}};
    for (char role : {'w', 'b'}) {
      const size_t index = sig.inputs.find(role);
      const Shape param = index < in.size() ? in[index] : Shape{0};
      if (IsAbsentShape(param)) {
        roles[role] = {"_", {0}};
      } else {
        roles[role] = {param == x_norm ? norm : std::string(param.size(), '1'), param};
      }
    }

    NnRule rule;
    EinsumRule& e = rule.einsum;
    for (size_t i = 0; i < sig.inputs.size() && i < in.size(); ++i) {
      e.inputs.push_back(roles[sig.inputs[i]].first);
      e.input_names.push_back(sig.input_names[i]);
    }
    for (char role : sig.outputs) {
      e.outputs.push_back(roles[role].first);
      e.output_shapes.push_back(roles[role].second);
    }
    e.output_names = sig.output_names;
    e.replicated = UniqueLetters(norm);
    e.align = sig.grad;
    // Every gradient is linear in out_grad (the last x-shaped operand).
    if (sig.grad) e.partial = PartialPolicy::Linear({static_cast<int>(sig.inputs.rfind('x'))});
    return rule;
  };
}

}  // namespace

SpmdRuleFns SoftmaxRule(const std::string& op) { return NnRuleFns(op, SoftmaxAxes(false)); }
SpmdRuleFns SoftmaxGradRule(const std::string& op) { return NnRuleFns(op, SoftmaxAxes(true)); }

SpmdRuleFns LayerNormRule() {
  return NnRuleFns("layer_norm", NormAxes({"xwb", {"x", "scale", "bias"}, "xss", {"out", "mean", "variance"}}));
}
SpmdRuleFns LayerNormGradRule() {
  return NnRuleFns("layer_norm_grad",
                   NormAxes({"xwbssx", {"x", "scale", "bias", "mean", "variance", "out_grad"}, "xwb",
                             {"x_grad", "scale_grad", "bias_grad"}, true}));
}
SpmdRuleFns RmsNormRule() {
  return NnRuleFns("rms_norm", NormAxes({"xw", {"x", "scale"}, "xs", {"out", "invvar"}}));
}
SpmdRuleFns RmsNormGradRule() {
  return NnRuleFns("rms_norm_grad", NormAxes({"xwsx", {"x", "scale", "invvar", "out_grad"}, "xw",
                                              {"x_grad", "scale_grad"}, true}));
}

}  // namespace pdist::ir::spmd
