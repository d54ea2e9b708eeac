// Ops that cut a tensor into pieces or join pieces: split, split_with_num, concat, slice and
// slice_grad.
//
//   %1, %2, %3 = split(%0) {axis = 1, sections = [2,-1,3]} : f32[4,2,5], f32[4,5,5], f32[4,3,5]
//   %4 = concat(%1, %2, %3) {axis = 1} : f32[4,10,5]
//   %5 = slice(%4) {axes = [1], decrease_axis = [1], ends = [-1], infer_flags = [1], starts = [-2]}
//        : f32[4,5]
#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "ir/op_def.h"
#include "ir/ops/op_families.h"
#include "ir/ops/op_helpers.h"
#include "ir/ops/shape.h"
#include "ir/spmd/rules.h"
#include "ir/status.h"

namespace pdist::ir {
namespace ops {

absl::StatusOr<SliceWindow> InferSliceWindow(const Shape& x, const AttributeMap& attrs) {
  PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> axes, GetIntList(attrs, "axes"));
  PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> starts, GetIntList(attrs, "starts"));
  PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> ends, GetIntList(attrs, "ends"));
  PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> decrease, GetIntList(attrs, "decrease_axis"));
  if (starts.size() != axes.size() || ends.size() != axes.size()) {
    return absl::InvalidArgumentError(absl::StrCat("axes, starts and ends must have one length, got ", axes.size(),
                                                   ", ", starts.size(), " and ", ends.size()));
  }
  const int64_t rank = static_cast<int64_t>(x.size());
  SliceWindow w{std::vector<int64_t>(x.size(), 0), x, {}};
  std::vector<bool> sliced(x.size(), false);
  for (size_t i = 0; i < axes.size(); ++i) {
    PDIST_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axes[i], rank));
    if (rank == 0 || sliced[axis]) {
      return absl::InvalidArgumentError(
          absl::StrCat("axis ", axes[i], rank == 0 ? " of a 0-D tensor" : " is named twice"));
    }
    sliced[axis] = true;
    // Negative bounds count from the end; then both clamp into [0, dim] (numpy semantics).
    const int64_t dim = x[axis];
    const int64_t start = std::clamp(starts[i] < 0 ? starts[i] + dim : starts[i], int64_t{0}, dim);
    const int64_t end = std::clamp(ends[i] < 0 ? ends[i] + dim : ends[i], int64_t{0}, dim);
    w.starts[axis] = start;
    w.sizes[axis] = std::max<int64_t>(end - start, 0);
  }
  std::vector<bool> dropped(x.size(), false);
  for (int64_t a : decrease) {
    PDIST_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(a, rank));
    if (rank == 0 || !sliced[axis] || w.sizes[axis] != 1) {
      return absl::InvalidArgumentError(absl::StrCat("decrease_axis ", a, " must be a sliced axis of size 1, got size ",
                                                     rank == 0 ? 0 : w.sizes[axis]));
    }
    dropped[axis] = true;
  }
  for (size_t i = 0; i < x.size(); ++i) {
    if (!dropped[i]) w.out.push_back(w.sizes[i]);
  }
  return w;
}

}  // namespace ops

namespace {

OpCost MoveCost(const InputTypes& in, const std::vector<TensorType>& out, const AttributeMap&) {
  return {0, ops::TotalBytes(in, out)};
}

// --- split / split_with_num ------------------------------------------------------------------

// split's sizes along the axis: one -1 section takes what the others leave.
absl::StatusOr<std::vector<int64_t>> SectionsFromList(int64_t dim, const AttributeMap& attrs) {
  PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> sections, GetIntList(attrs, "sections"));
  if (sections.empty()) return absl::InvalidArgumentError("sections is empty");
  const int64_t minus_ones = std::count(sections.begin(), sections.end(), -1);
  int64_t known = 0;
  for (int64_t s : sections) {
    if (s < -1 || minus_ones > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("sections ", ShapeToString(sections), ": sizes must be >= 0, with at most one -1"));
    }
    if (s >= 0) known += s;
  }
  if (minus_ones == 1) *std::find(sections.begin(), sections.end(), -1) = dim - known;
  if (known > dim || std::accumulate(sections.begin(), sections.end(), int64_t{0}) != dim) {
    return absl::InvalidArgumentError(absl::StrCat("sections ", ShapeToString(sections), " do not add up to ", dim));
  }
  return sections;
}

// split_with_num's sizes: `num` equal pieces.
absl::StatusOr<std::vector<int64_t>> SectionsFromNum(int64_t dim, const AttributeMap& attrs) {
  PDIST_ASSIGN_OR_RETURN(int64_t num, GetInt(attrs, "num"));
  if (num <= 0 || dim % num != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("num ", num, " must be positive and divide the split dim (", dim, ")"));
  }
  return std::vector<int64_t>(static_cast<size_t>(num), dim / num);
}

using SectionsFn = absl::StatusOr<std::vector<int64_t>> (*)(int64_t dim, const AttributeMap& attrs);

InferMetaFn SplitMeta(SectionsFn sections_of) {
  return [sections_of](const InputTypes& in, const AttributeMap& attrs) -> absl::StatusOr<std::vector<TensorType>> {
    if (in[0]->rank() == 0) return absl::InvalidArgumentError("cannot split a 0-D tensor");
    PDIST_ASSIGN_OR_RETURN(int64_t axis, GetInt(attrs, "axis"));
    PDIST_ASSIGN_OR_RETURN(axis, ops::NormalizeAxis(axis, in[0]->rank()));
    PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> sections, sections_of(in[0]->shape[axis], attrs));
    std::vector<TensorType> out(sections.size(), *in[0]);
    for (size_t i = 0; i < sections.size(); ++i) out[i].shape[axis] = sections[i];
    return out;
  };
}

// The gradient of a split is the concat of its result gradients (zeros where none flows).
absl::StatusOr<std::vector<Value*>> SplitGrad(Builder& b, const Operation& op, const std::vector<Value*>& out_grads) {
  std::vector<Value*> pieces;
  for (size_t i = 0; i < op.num_results(); ++i) {
    PDIST_ASSIGN_OR_RETURN(Value * g, ops::OrZeros(b, out_grads[i], op.result(i)));
    pieces.push_back(g);
  }
  PDIST_ASSIGN_OR_RETURN(int64_t axis, GetInt(op.attrs(), "axis"));
  PDIST_ASSIGN_OR_RETURN(Value * dx, b.Op1("concat", pieces, {{"axis", axis}}));
  return std::vector<Value*>{dx};
}

// --- concat -----------------------------------------------------------------------------------

absl::StatusOr<std::vector<TensorType>> ConcatMeta(const InputTypes& in, const AttributeMap& attrs) {
  if (in.empty()) return absl::InvalidArgumentError("concat needs at least one operand");
  PDIST_ASSIGN_OR_RETURN(int64_t axis, GetInt(attrs, "axis"));
  if (in[0]->rank() == 0) return absl::InvalidArgumentError("cannot concat 0-D tensors");
  PDIST_ASSIGN_OR_RETURN(axis, ops::NormalizeAxis(axis, in[0]->rank()));
  // Every operand must equal operand 0 once the concat axis is ignored (set to 0).
  TensorType common = *in[0];
  common.shape[axis] = 0;
  TensorType out = common;
  for (size_t i = 0; i < in.size(); ++i) {
    TensorType t = *in[i];
    const int64_t size = t.rank() == common.rank() ? t.shape[axis] : 0;
    if (t.rank() == common.rank()) t.shape[axis] = 0;
    if (t != common) {
      return absl::InvalidArgumentError(absl::StrCat("operand ", i, " (", in[i]->ToString(),
                                                     ") differs from operand 0 (", in[0]->ToString(),
                                                     ") in dtype or in a dim other than ", axis));
    }
    out.shape[axis] += size;
  }
  return std::vector<TensorType>{out};
}

// The gradient of a concat splits out_grad back into the operands' sizes.
absl::StatusOr<std::vector<Value*>> ConcatGrad(Builder& b, const Operation& op, const std::vector<Value*>& out_grads) {
  if (out_grads[0] == nullptr) return std::vector<Value*>(op.num_operands(), nullptr);
  PDIST_ASSIGN_OR_RETURN(int64_t axis, GetInt(op.attrs(), "axis"));
  PDIST_ASSIGN_OR_RETURN(axis, ops::NormalizeAxis(axis, op.operand(0)->type().rank()));
  std::vector<int64_t> sections;
  for (const Value* v : op.operands()) sections.push_back(v->type().shape[axis]);
  return b.Create("split", {out_grads[0]}, {{"sections", sections}, {"axis", axis}});
}

// --- slice / slice_grad ----------------------------------------------------------------------

absl::StatusOr<std::vector<TensorType>> SliceMeta(const InputTypes& in, const AttributeMap& attrs) {
  PDIST_ASSIGN_OR_RETURN(ops::SliceWindow w, ops::InferSliceWindow(in[0]->shape, attrs));
  return std::vector<TensorType>{{w.out, in[0]->dtype}};
}

// (input, out_grad) → input_grad: out_grad written into zeros.
absl::StatusOr<std::vector<TensorType>> SliceGradMeta(const InputTypes& in, const AttributeMap& attrs) {
  PDIST_ASSIGN_OR_RETURN(std::vector<TensorType> out, SliceMeta(in, attrs));
  if (*in[1] != out[0]) {
    return absl::InvalidArgumentError(
        absl::StrCat("out_grad must be ", out[0].ToString(), " (slice's result), got ", in[1]->ToString()));
  }
  return std::vector<TensorType>{*in[0]};
}

absl::StatusOr<std::vector<Value*>> SliceGrad(Builder& b, const Operation& op, const std::vector<Value*>& out_grads) {
  if (out_grads[0] == nullptr) return std::vector<Value*>{nullptr};
  return ops::EmitGradOp(b, op, "slice_grad", {op.operand(0), out_grads[0]}, {0});
}

}  // namespace

absl::Status ops::RegisterSlicingOps(OpRegistry& registry) {
  using spmd::ShapesFromMeta;
  const spmd::SpmdRuleFns split_rule = spmd::SplitRule("split", ShapesFromMeta(SplitMeta(SectionsFromList)));
  const spmd::SpmdRuleFns split_num_rule =
      spmd::SplitRule("split_with_num", ShapesFromMeta(SplitMeta(SectionsFromNum)));
  const spmd::SpmdRuleFns concat_rule = spmd::ConcatRule(ShapesFromMeta(ConcatMeta));
  const spmd::SpmdRuleFns slice_rule = spmd::SliceRule(ShapesFromMeta(SliceMeta));
  const spmd::SpmdRuleFns slice_grad_rule = spmd::SliceGradRule();
  PDIST_RETURN_IF_ERROR(registry.Register(OpDef{
      .name = "split",
      .inputs = {{"x"}},
      .outputs = {{"out", /*variadic=*/true}},
      .attrs = {{"sections", std::vector<int64_t>{}}, {"axis", int64_t{0}}},
      .infer_meta = SplitMeta(SectionsFromList),
      .grad = SplitGrad,
      .cost = MoveCost,
      .infer_spmd = split_rule.infer,
      .infer_spmd_reverse = split_rule.reverse,
      .describe_spmd = split_rule.describe,
  }));
  PDIST_RETURN_IF_ERROR(registry.Register(OpDef{
      .name = "split_with_num",
      .inputs = {{"x"}},
      .outputs = {{"out", /*variadic=*/true}},
      .attrs = {{"num", int64_t{1}}, {"axis", int64_t{0}}},
      .infer_meta = SplitMeta(SectionsFromNum),
      .grad = SplitGrad,
      .cost = MoveCost,
      .infer_spmd = split_num_rule.infer,
      .infer_spmd_reverse = split_num_rule.reverse,
      .describe_spmd = split_num_rule.describe,
  }));
  PDIST_RETURN_IF_ERROR(registry.Register(OpDef{
      .name = "concat",
      .inputs = {{"x", /*optional=*/false, /*variadic=*/true}},
      .outputs = {{"out"}},
      .attrs = {{"axis", int64_t{0}}},
      .infer_meta = ConcatMeta,
      .grad = ConcatGrad,
      .cost = MoveCost,
      .infer_spmd = concat_rule.infer,
      .infer_spmd_reverse = concat_rule.reverse,
      .describe_spmd = concat_rule.describe,
  }));
  // infer_flags is accepted for Paddle compatibility and ignored: pdist's shapes are static.
  const std::vector<AttrSpec> slice_attrs = {{"axes", std::vector<int64_t>{}},
                                             {"starts", std::vector<int64_t>{}},
                                             {"ends", std::vector<int64_t>{}},
                                             {"infer_flags", std::vector<int64_t>{}},
                                             {"decrease_axis", std::vector<int64_t>{}}};
  PDIST_RETURN_IF_ERROR(registry.Register(OpDef{
      .name = "slice",
      .inputs = {{"input"}},
      .outputs = {{"out"}},
      .attrs = slice_attrs,
      .infer_meta = SliceMeta,
      .grad = SliceGrad,
      .cost = MoveCost,
      .infer_spmd = slice_rule.infer,
      .infer_spmd_reverse = slice_rule.reverse,
      .describe_spmd = slice_rule.describe,
  }));
  return registry.Register(OpDef{
      .name = "slice_grad",
      .inputs = {{"input"}, {"out_grad"}},
      .outputs = {{"input_grad"}},
      .attrs = slice_attrs,
      .infer_meta = SliceGradMeta,
      .grad_kind = GradKind::kGradientOp,
      .grad = nullptr,
      .cost = MoveCost,
      .infer_spmd = slice_grad_rule.infer,
      .infer_spmd_reverse = slice_grad_rule.reverse,
      .describe_spmd = slice_grad_rule.describe,
  });
}

}  // namespace pdist::ir
