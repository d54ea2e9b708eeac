// SPMD rules of the optimizer ops sgd, momentum and adamw.
//
//   adamw param f32[64,32], learning_rate and beta pows f32[1]:
//   "ab,ab,1,ab,ab,1,1->ab,ab,ab,1,1"
//
// The update is elementwise over the parameter: param, grad and the moment / velocity states
// share one mapping, merged in operand order (param first), so a ZeRO-sharded state shards the
// update and the parameter is sliced to match. The gradient must be whole — a Partial grad comes
// back with its partial cleared, so completion inserts the all-reduce (or reduce-scatter) before
// the update. learning_rate, the beta powers and the optional skip_update (dynamic loss scaling's
// overflow count) are scalars, replicated; the beta power results depend on nothing else and are
// never Partial.
#include "absl/strings/str_cat.h"
#include "ir/spmd/nn_rule.h"
#include "ir/spmd/rules_nn.h"
#include "ir/status.h"

namespace pdist::ir::spmd {
namespace {

struct OptimizerSignature {
  std::string inputs;                     // per operand: 'p' shaped like param, 's' a scalar,
                                          // 'o' an optional scalar (skip_update)
  std::vector<std::string> input_names;
  std::vector<int> outputs;               // per result: the operand it is the new value of
  std::vector<std::string> output_names;
};

NnRuleBuilder OptimizerAxes(OptimizerSignature sig) {
  return [sig](const std::vector<Shape>& in, const AttributeMap&) -> absl::StatusOr<NnRule> {
    PDIST_ASSIGN_OR_RETURN(const Shape param, RequireShape(in, 0, "param"));
    const std::string letters = MarkSizeOne(Letters(static_cast<int64_t>(param.size())), param);
    NnRule rule;
    EinsumRule& e = rule.einsum;
    for (size_t i = 0; i < sig.inputs.size(); ++i) {
      if (sig.inputs[i] == 'o') {  // the optional skip_update: a scalar when present
        if (i >= in.size()) break;   // left out of the op's operands
        e.inputs.push_back(IsAbsentShape(in[i]) ? "_" : std::string(in[i].size(), '1'));
        continue;
      }
      PDIST_ASSIGN_OR_RETURN(const Shape shape, RequireShape(in, i, sig.input_names[i].c_str()));
      if (sig.inputs[i] == 'p' && shape != param) {
        return absl::InvalidArgumentError(absl::StrCat(sig.input_names[i], " ", ShapeToString(shape),
                                                       " must have param's shape ", ShapeToString(param)));
      }
      e.inputs.push_back(sig.inputs[i] == 'p' ? letters : std::string(shape.size(), '1'));
    }
    e.input_names.assign(sig.input_names.begin(), sig.input_names.begin() + static_cast<std::ptrdiff_t>(e.inputs.size()));
    for (size_t o = 0; o < sig.outputs.size(); ++o) {
      const auto of = static_cast<size_t>(sig.outputs[o]);
      e.outputs.push_back(e.inputs[of]);
      e.output_shapes.push_back(in[of]);
      if (sig.inputs[of] != 'p') rule.whole_outputs.push_back(static_cast<int>(o));
    }
    e.output_names = sig.output_names;
    return rule;
  };
}

}  // namespace

SpmdRuleFns SgdRule() {
  return NnRuleFns("sgd", OptimizerAxes({"pspo", {"param", "learning_rate", "grad", "skip_update"}, {0}, {"param_out"}}));
}

SpmdRuleFns MomentumRule() {
  return NnRuleFns("momentum", OptimizerAxes({"pppso",
                                              {"param", "grad", "velocity", "learning_rate", "skip_update"},
                                              {0, 2},
                                              {"param_out", "velocity_out"}}));
}

SpmdRuleFns AdamWRule() {
  return NnRuleFns(
      "adamw",
      OptimizerAxes({"ppsppsso",
                     {"param", "grad", "learning_rate", "moment1", "moment2", "beta1_pow", "beta2_pow", "skip_update"},
                     {0, 3, 4, 5, 6},
                     {"param_out", "moment1_out", "moment2_out", "beta1_pow_out", "beta2_pow_out"}}));
}

SpmdRuleFns UpdateLossScalingRule() {
  return NnRuleFns("update_loss_scaling",
                   OptimizerAxes({"sssss",
                                  {"found_inf", "loss_scaling", "good_steps", "bad_steps", "skipped_steps"},
                                  {0, 1, 2, 3, 4},
                                  {"found_inf_out", "loss_scaling_out", "good_steps_out", "bad_steps_out",
                                   "skipped_steps_out"}}));
}

}  // namespace pdist::ir::spmd
