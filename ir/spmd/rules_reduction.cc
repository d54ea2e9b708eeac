// SPMD rules of the reductions sum mean max min, their gradient ops, and full.
#include "absl/strings/str_cat.h"
#include "ir/ops/reduction.h"
#include "ir/spmd/rules.h"
#include "ir/status.h"

namespace pdist::ir::spmd {
namespace {

struct ReductionAxes {
  std::string x;        // "abc"
  std::string out;      // "ac" ("a1c" with keep_dim)
  std::string reduced;  // "b"
};

absl::StatusOr<ReductionAxes> AxesOf(const std::string& op, const Shape& x, const AttributeMap& attrs) {
  PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> axis, IntListAttr(attrs, "axis"));
  PDIST_ASSIGN_OR_RETURN(bool keep_dim, BoolAttr(attrs, "keep_dim", false));
  absl::StatusOr<std::vector<bool>> reduced = ops::ReducedAxes(static_cast<int64_t>(x.size()), axis);
  if (!reduced.ok()) return WithContext(reduced.status(), op);
  ReductionAxes a;
  a.x = Letters(static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    if (!(*reduced)[i]) {
      a.out.push_back(a.x[i]);
      continue;
    }
    a.reduced.push_back(a.x[i]);
    if (keep_dim) a.out.push_back('1');
  }
  return a;
}

// The partial type a reduced sharded axis gives, and the Partial inputs that pass through:
// sum and mean are linear (sum, avg pass); max commutes only with max; min has neither.
void SetPartial(ReductionKind kind, EinsumRule& rule, const std::string& reduced) {
  switch (kind) {
    case ReductionKind::kSum:
      rule.contracted = ReduceType::kSum;
      rule.partial = PartialPolicy::Linear({0});
      return;
    case ReductionKind::kMean:
      rule.contracted = ReduceType::kAvg;
      rule.partial = PartialPolicy::Linear({0});
      return;
    case ReductionKind::kMax:
      rule.contracted = ReduceType::kMax;
      rule.partial = {{0}, PartialPolicy::Mode::kOne, {ReduceType::kMax}};
      return;
    case ReductionKind::kMin:
      rule.replicated = reduced;  // no Partial(min): the reduced axes must be whole
      return;
  }
}

}  // namespace

SpmdRuleFns ReductionRule(std::string op, ReductionKind kind) {
  return EinsumRuleFns(
      [op, kind](const std::vector<Shape>& in, const AttributeMap& attrs) -> absl::StatusOr<EinsumRule> {
        PDIST_RETURN_IF_ERROR(CheckInputCount(op, in, 1));
        PDIST_ASSIGN_OR_RETURN(ReductionAxes a, AxesOf(op, in[0], attrs));
        EinsumRule rule;
        rule.op = op;
        rule.inputs = {a.x};
        rule.outputs = {a.out};
        rule.input_names = {"x"};
        rule.output_names = {"out"};
        SetPartial(kind, rule, a.reduced);
        return rule;
      });
}

SpmdRuleFns ReductionGradRule(std::string op, ReductionKind kind) {
  const bool reads_out = kind == ReductionKind::kMax || kind == ReductionKind::kMin;
  return EinsumRuleFns(
      [op, reads_out](const std::vector<Shape>& in, const AttributeMap& attrs) -> absl::StatusOr<EinsumRule> {
        PDIST_RETURN_IF_ERROR(CheckInputCount(op, in, reads_out ? 3 : 2));
        PDIST_ASSIGN_OR_RETURN(ReductionAxes a, AxesOf(op, in[0], attrs));
        EinsumRule rule;
        rule.op = op;
        const int grad = reads_out ? 2 : 1;
        rule.inputs = {a.x};
        rule.input_names = {"x"};
        if (reads_out) {
          rule.inputs.push_back(a.out);
          rule.input_names.push_back("out");
        }
        rule.inputs.push_back(a.out);
        rule.input_names.push_back("out_grad");
        rule.outputs = {a.x};
        rule.output_names = {"x_grad"};
        // The kernels count the reduced elements (mean) or the ties (max, min) locally: the
        // reduced axes must be whole on every rank.
        rule.replicated = a.reduced;
        rule.merge_order = {grad, 0};
        if (reads_out) rule.merge_order.push_back(1);
        rule.partial = PartialPolicy::Linear({grad});
        return rule;
      });
}

SpmdRuleFns FullRule() {
  return EinsumRuleFns([](const std::vector<Shape>& in, const AttributeMap& attrs) -> absl::StatusOr<EinsumRule> {
    PDIST_RETURN_IF_ERROR(CheckInputCount("full", in, 0));
    PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> shape, IntListAttr(attrs, "shape"));
    EinsumRule rule;
    rule.op = "full";
    rule.outputs = {Letters(static_cast<int64_t>(shape.size()))};
    rule.output_names = {"out"};
    rule.output_shapes = {shape};
    return rule;
  });
}

}  // namespace pdist::ir::spmd
