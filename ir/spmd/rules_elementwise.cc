// SPMD rules of the elementwise ops: binary with broadcasting (+ grads), unary (+ grads), dropout.
#include "absl/strings/str_cat.h"
#include "ir/attribute.h"
#include "ir/spmd/rules.h"
#include "ir/status.h"

namespace pdist::ir::spmd {
namespace {

// x and y right-aligned against the broadcast rank; size-1 dims '1'. Returns {x, y, out}.
std::vector<std::string> BroadcastLetters(const Shape& x, const Shape& y) {
  const int64_t xr = static_cast<int64_t>(x.size());
  const int64_t yr = static_cast<int64_t>(y.size());
  const int64_t rank = std::max(xr, yr);
  return {MarkSizeOne(BroadcastAxes(xr, rank), x), MarkSizeOne(BroadcastAxes(yr, rank), y), BroadcastAxes(rank, rank)};
}

PartialPolicy BinaryPolicy(BinaryLinearity linearity) {
  using Mode = PartialPolicy::Mode;
  switch (linearity) {
    case BinaryLinearity::kAdditive:
      return PartialPolicy::Linear({0, 1}, Mode::kAlike);
    case BinaryLinearity::kMultiplicative:
      return PartialPolicy::Linear({0, 1}, Mode::kOne);
    case BinaryLinearity::kNumerator:
      return PartialPolicy::Linear({0});
    case BinaryLinearity::kMaximum:
      return {{0, 1}, Mode::kAlike, {ReduceType::kMax}};
    case BinaryLinearity::kNone:
      break;
  }
  return PartialPolicy::None();
}

// scale(x) = s·x + b (or s·(x + b)): avg commutes with any affine map, sum only without an
// offset, max only with a positive factor.
absl::StatusOr<PartialPolicy> ScalePolicy(const AttributeMap& attrs) {
  PDIST_ASSIGN_OR_RETURN(double scale, DoubleAttr(attrs, "scale", 1.0));
  PDIST_ASSIGN_OR_RETURN(double bias, DoubleAttr(attrs, "bias", 0.0));
  PartialPolicy policy{{0}, PartialPolicy::Mode::kOne, {}};
  if (bias == 0.0) policy.passes.push_back(ReduceType::kSum);
  policy.passes.push_back(ReduceType::kAvg);
  if (scale > 0.0) policy.passes.push_back(ReduceType::kMax);
  return policy;
}

// A cast to a floating type keeps sums, means and maxima (up to rounding); to an integer or
// bool it does not.
absl::StatusOr<PartialPolicy> CastPolicy(const AttributeMap& attrs) {
  DataType dtype = DataType::kFloat32;
  if (attrs.count("dtype")) {
    PDIST_ASSIGN_OR_RETURN(dtype, GetDataType(attrs, "dtype"));
  }
  if (!IsFloatingPoint(dtype)) return PartialPolicy::None();
  return PartialPolicy::Movement({0});
}

}  // namespace

SpmdRuleFns BinaryRule(std::string op, BinaryLinearity linearity) {
  return EinsumRuleFns(
      [op, linearity](const std::vector<Shape>& in, const AttributeMap&) -> absl::StatusOr<EinsumRule> {
        PDIST_RETURN_IF_ERROR(CheckInputCount(op, in, 2));
        const std::vector<std::string> letters = BroadcastLetters(in[0], in[1]);
        EinsumRule rule;
        rule.op = op;
        rule.inputs = {letters[0], letters[1]};
        rule.outputs = {letters[2]};
        rule.input_names = {"x", "y"};
        rule.output_names = {"out"};
        rule.partial = BinaryPolicy(linearity);
        return rule;
      });
}

SpmdRuleFns BinaryGradRule(std::string op) {
  return EinsumRuleFns([op](const std::vector<Shape>& in, const AttributeMap&) -> absl::StatusOr<EinsumRule> {
    PDIST_RETURN_IF_ERROR(CheckInputCount(op, in, 3));
    const std::vector<std::string> letters = BroadcastLetters(in[0], in[1]);
    EinsumRule rule;
    rule.op = op;
    rule.inputs = {letters[0], letters[1], MarkSizeOne(letters[2], in[2])};
    rule.outputs = {letters[0], letters[1]};
    rule.input_names = {"x", "y", "out_grad"};
    rule.output_names = {"x_grad", "y_grad"};
    rule.merge_order = {2, 0, 1};
    rule.partial = PartialPolicy::Linear({2});
    return rule;
  });
}

SpmdRuleFns ExpandRule() {
  return EinsumRuleFns([](const std::vector<Shape>& in, const AttributeMap& attrs) -> absl::StatusOr<EinsumRule> {
    PDIST_RETURN_IF_ERROR(CheckInputCount("expand", in, 1));
    PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> shape, GetIntList(attrs, "shape"));
    const Shape out(shape.begin(), shape.end());
    if (out.size() < in[0].size()) {
      return absl::InvalidArgumentError(absl::StrCat("expand: shape ", ShapeToString(out), " has fewer dims than x ",
                                                     ShapeToString(in[0])));
    }
    const std::vector<std::string> letters = BroadcastLetters(in[0], out);
    EinsumRule rule;
    rule.op = "expand";
    rule.inputs = {letters[0]};
    rule.outputs = {letters[2]};
    rule.input_names = {"x"};
    rule.output_names = {"out"};
    rule.output_shapes = {out};
    rule.partial = PartialPolicy::Movement({0});
    return rule;
  });
}

SpmdRuleFns WhereRule() {
  return EinsumRuleFns([](const std::vector<Shape>& in, const AttributeMap&) -> absl::StatusOr<EinsumRule> {
    PDIST_RETURN_IF_ERROR(CheckInputCount("where", in, 3));
    int64_t rank = 0;
    for (const Shape& s : in) rank = std::max(rank, static_cast<int64_t>(s.size()));
    Shape out(static_cast<size_t>(rank), 1);  // the broadcast shape (sizes no input letter carries)
    for (const Shape& s : in) {
      for (size_t d = 0; d < s.size(); ++d) {
        int64_t& o = out[static_cast<size_t>(rank) - s.size() + d];
        if (s[d] != 1) o = s[d];
      }
    }
    EinsumRule rule;
    rule.op = "where";
    rule.output_shapes = {out};
    for (const Shape& s : in) rule.inputs.push_back(MarkSizeOne(BroadcastAxes(static_cast<int64_t>(s.size()), rank), s));
    rule.outputs = {BroadcastAxes(rank, rank)};
    rule.input_names = {"condition", "x", "y"};
    rule.output_names = {"out"};
    rule.partial = PartialPolicy::Linear({1, 2}, PartialPolicy::Mode::kAlike);
    return rule;
  });
}

SpmdRuleFns UnaryRule(std::string op, UnaryKind kind) {
  return EinsumRuleFns(
      [op, kind](const std::vector<Shape>& in, const AttributeMap& attrs) -> absl::StatusOr<EinsumRule> {
        PDIST_RETURN_IF_ERROR(CheckInputCount(op, in, 1));
        EinsumRule rule;
        rule.op = op;
        const std::string axes = Letters(static_cast<int64_t>(in[0].size()));
        rule.inputs = {axes};
        rule.outputs = {axes};
        rule.input_names = {"x"};
        rule.output_names = {"out"};
        if (kind == UnaryKind::kScale) {
          PDIST_ASSIGN_OR_RETURN(rule.partial, ScalePolicy(attrs));
        } else if (kind == UnaryKind::kCast) {
          PDIST_ASSIGN_OR_RETURN(rule.partial, CastPolicy(attrs));
        }
        return rule;
      });
}

SpmdRuleFns UnaryGradRule(std::string op, std::string saved_name) {
  return EinsumRuleFns(
      [op, saved_name](const std::vector<Shape>& in, const AttributeMap&) -> absl::StatusOr<EinsumRule> {
        PDIST_RETURN_IF_ERROR(CheckInputCount(op, in, 2));
        const std::string axes = Letters(static_cast<int64_t>(in[1].size()));
        EinsumRule rule;
        rule.op = op;
        rule.inputs = {axes, axes};
        rule.outputs = {axes};
        rule.input_names = {saved_name, "out_grad"};
        rule.output_names = {"x_grad"};
        rule.merge_order = {1, 0};
        rule.partial = PartialPolicy::Linear({1});
        return rule;
      });
}

SpmdRuleFns DropoutRule() {
  return EinsumRuleFns([](const std::vector<Shape>& in, const AttributeMap&) -> absl::StatusOr<EinsumRule> {
    if (in.empty() || in.size() > 2) {
      return absl::InvalidArgumentError(absl::StrCat("dropout: expected 1 or 2 inputs, got ", in.size()));
    }
    const std::string axes = Letters(static_cast<int64_t>(in[0].size()));
    EinsumRule rule;
    rule.op = "dropout";
    rule.inputs = {axes};
    if (in.size() == 2) {
      const bool absent = in[1] == Shape{0};
      rule.inputs.push_back(absent ? "_" : std::string(in[1].size(), '1'));  // the seed is replicated
    }
    rule.outputs = {axes, axes};
    rule.input_names = {"x", "seed_tensor"};
    rule.output_names = {"out", "mask"};
    return rule;
  });
}

}  // namespace pdist::ir::spmd
