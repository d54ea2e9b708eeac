// SPMD rules of split, split_with_num, concat, slice and slice_grad.
#include "absl/strings/str_cat.h"
#include "ir/ops/op_helpers.h"
#include "ir/spmd/rules.h"
#include "ir/status.h"

namespace pdist::ir::spmd {
namespace {

absl::StatusOr<std::vector<Shape>> OutShapes(const std::string& op, const OutputShapesFn& fn,
                                             const std::vector<Shape>& in, const AttributeMap& attrs) {
  absl::StatusOr<std::vector<Shape>> out = fn(in, attrs);
  if (!out.ok()) return WithContext(out.status(), op);
  return out;
}

// The letter of the `axis` attribute of a rank-`rank` tensor with letters `x`.
absl::StatusOr<char> AxisLetter(const std::string& op, const std::string& x, const AttributeMap& attrs) {
  PDIST_ASSIGN_OR_RETURN(int64_t axis, IntAttr(attrs, "axis", 0));
  absl::StatusOr<int64_t> normalized = ops::NormalizeAxis(axis, static_cast<int64_t>(x.size()));
  if (!normalized.ok() || x.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": axis ", axis, " out of range for rank ", x.size()));
  }
  return x[static_cast<size_t>(*normalized)];
}

std::vector<std::string> Numbered(const char* stem, size_t count) {
  std::vector<std::string> names;
  for (size_t i = 0; i < count; ++i) names.push_back(absl::StrCat(stem, i));
  return names;
}

// slice's letters: x's, the sliced ones (replicated), and out's (decrease_axis dropped).
struct SliceAxes {
  std::string x, sliced, out;
};

absl::StatusOr<SliceAxes> SliceAxesOf(const std::string& op, const Shape& x, const AttributeMap& attrs) {
  PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> axes, IntListAttr(attrs, "axes"));
  PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> decrease, IntListAttr(attrs, "decrease_axis"));
  const int64_t rank = static_cast<int64_t>(x.size());
  SliceAxes a{Letters(rank), "", ""};
  std::string dropped;
  for (const auto& [list, into] : {std::make_pair(&axes, &a.sliced), std::make_pair(&decrease, &dropped)}) {
    for (int64_t axis : *list) {
      absl::StatusOr<int64_t> i = ops::NormalizeAxis(axis, rank);
      if (!i.ok() || rank == 0) {
        return absl::InvalidArgumentError(absl::StrCat(op, ": axis ", axis, " out of range for rank ", rank));
      }
      into->push_back(a.x[static_cast<size_t>(*i)]);
    }
  }
  for (char c : a.x) {
    if (dropped.find(c) == std::string::npos) a.out.push_back(c);
  }
  return a;
}

}  // namespace

SpmdRuleFns SplitRule(std::string op, OutputShapesFn out_shapes) {
  return EinsumRuleFns(
      [op, out_shapes](const std::vector<Shape>& in, const AttributeMap& attrs) -> absl::StatusOr<EinsumRule> {
        PDIST_RETURN_IF_ERROR(CheckInputCount(op, in, 1));
        PDIST_ASSIGN_OR_RETURN(std::vector<Shape> shapes, OutShapes(op, out_shapes, in, attrs));
        const std::string x = Letters(static_cast<int64_t>(in[0].size()));
        PDIST_ASSIGN_OR_RETURN(char axis, AxisLetter(op, x, attrs));
        EinsumRule rule;
        rule.op = op;
        rule.inputs = {x};
        rule.outputs = std::vector<std::string>(shapes.size(), x);
        rule.input_names = {"x"};
        rule.output_names = Numbered("out", shapes.size());
        rule.replicated = std::string(1, axis);
        rule.partial = PartialPolicy::Movement({0});
        rule.output_shapes = std::move(shapes);
        return rule;
      });
}

SpmdRuleFns ConcatRule(OutputShapesFn out_shapes) {
  return EinsumRuleFns(
      [out_shapes](const std::vector<Shape>& in, const AttributeMap& attrs) -> absl::StatusOr<EinsumRule> {
        if (in.empty()) return absl::InvalidArgumentError("concat: needs at least one input");
        PDIST_ASSIGN_OR_RETURN(std::vector<Shape> shapes, OutShapes("concat", out_shapes, in, attrs));
        const std::string x = Letters(static_cast<int64_t>(in[0].size()));
        PDIST_ASSIGN_OR_RETURN(char axis, AxisLetter("concat", x, attrs));
        EinsumRule rule;
        rule.op = "concat";
        rule.inputs = std::vector<std::string>(in.size(), x);
        rule.outputs = {x};
        rule.input_names = Numbered("x", in.size());
        rule.output_names = {"out"};
        rule.replicated = std::string(1, axis);
        rule.align = true;
        std::vector<int> all;
        for (size_t i = 0; i < in.size(); ++i) all.push_back(static_cast<int>(i));
        rule.partial = PartialPolicy::Movement(all, PartialPolicy::Mode::kAlike);
        rule.output_shapes = std::move(shapes);
        return rule;
      });
}

SpmdRuleFns SliceRule(OutputShapesFn out_shapes) {
  return EinsumRuleFns(
      [out_shapes](const std::vector<Shape>& in, const AttributeMap& attrs) -> absl::StatusOr<EinsumRule> {
        PDIST_RETURN_IF_ERROR(CheckInputCount("slice", in, 1));
        PDIST_ASSIGN_OR_RETURN(std::vector<Shape> shapes, OutShapes("slice", out_shapes, in, attrs));
        PDIST_ASSIGN_OR_RETURN(SliceAxes a, SliceAxesOf("slice", in[0], attrs));
        EinsumRule rule;
        rule.op = "slice";
        rule.inputs = {a.x};
        rule.outputs = {a.out};
        rule.input_names = {"input"};
        rule.output_names = {"out"};
        rule.replicated = a.sliced;
        rule.partial = PartialPolicy::Movement({0});
        rule.output_shapes = std::move(shapes);
        return rule;
      });
}

SpmdRuleFns SliceGradRule() {
  return EinsumRuleFns([](const std::vector<Shape>& in, const AttributeMap& attrs) -> absl::StatusOr<EinsumRule> {
    PDIST_RETURN_IF_ERROR(CheckInputCount("slice_grad", in, 2));
    PDIST_ASSIGN_OR_RETURN(SliceAxes a, SliceAxesOf("slice_grad", in[0], attrs));
    EinsumRule rule;
    rule.op = "slice_grad";
    rule.inputs = {a.x, a.out};
    rule.outputs = {a.x};
    rule.input_names = {"input", "out_grad"};
    rule.output_names = {"input_grad"};
    rule.replicated = a.sliced;
    rule.merge_order = {1, 0};
    rule.partial = PartialPolicy::Linear({1});  // zero padding: sums and means only
    return rule;
  });
}

namespace {

// Letters of gather's x, index and out: distinct letters for x's axes then index's, size-1 axes
// '1'; out = x[:axis] + index + x[axis+1:]; `gathered` is x's axis letter.
struct GatherAxes {
  std::string x, index, out, gathered;
};

absl::StatusOr<GatherAxes> GatherAxesOf(const Shape& x, const Shape& index, int64_t axis) {
  PDIST_ASSIGN_OR_RETURN(axis, ops::NormalizeAxis(axis, static_cast<int64_t>(x.size())));
  const std::string letters = Letters(static_cast<int64_t>(x.size() + index.size()));
  GatherAxes a;
  a.x = MarkSizeOne(letters.substr(0, x.size()), x);
  a.index = MarkSizeOne(letters.substr(x.size()), index);
  a.gathered = std::string(1, letters[static_cast<size_t>(axis)]);
  a.out = a.x.substr(0, static_cast<size_t>(axis)) + a.index + a.x.substr(static_cast<size_t>(axis) + 1);
  a.x[static_cast<size_t>(axis)] = a.gathered[0];  // never '1': it is the letter kept replicated
  return a;
}

}  // namespace

SpmdRuleFns GatherRule() {
  return EinsumRuleFns([](const std::vector<Shape>& in, const AttributeMap& attrs) -> absl::StatusOr<EinsumRule> {
    PDIST_RETURN_IF_ERROR(CheckInputCount("gather", in, 2));
    PDIST_ASSIGN_OR_RETURN(int64_t axis, IntAttr(attrs, "axis", 0));
    PDIST_ASSIGN_OR_RETURN(GatherAxes a, GatherAxesOf(in[0], in[1], axis));
    EinsumRule rule;
    rule.op = "gather";
    rule.inputs = {a.x, a.index};
    rule.outputs = {a.out};
    rule.input_names = {"x", "index"};
    rule.output_names = {"out"};
    rule.replicated = a.gathered;
    rule.partial = PartialPolicy::Movement({0});
    return rule;
  });
}

SpmdRuleFns GatherGradRule() {
  return EinsumRuleFns([](const std::vector<Shape>& in, const AttributeMap& attrs) -> absl::StatusOr<EinsumRule> {
    PDIST_RETURN_IF_ERROR(CheckInputCount("gather_grad", in, 2));
    PDIST_ASSIGN_OR_RETURN(int64_t axis, IntAttr(attrs, "axis", 0));
    PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> x_shape, GetIntList(attrs, "x_shape"));
    const Shape x(x_shape.begin(), x_shape.end());
    PDIST_ASSIGN_OR_RETURN(GatherAxes a, GatherAxesOf(x, in[0], axis));
    EinsumRule rule;
    rule.op = "gather_grad";
    rule.inputs = {a.index, a.out};
    rule.outputs = {a.x};
    rule.input_names = {"index", "out_grad"};
    rule.output_names = {"x_grad"};
    rule.replicated = a.gathered;
    rule.merge_order = {1, 0};
    rule.partial = PartialPolicy::Linear({1});
    rule.output_shapes = {x};
    return rule;
  });
}

}  // namespace pdist::ir::spmd
