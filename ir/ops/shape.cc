// View ops reshape, unsqueeze, squeeze (results alias their input) and transpose; the slicing
// ops live in slicing.cc.
//
//   %1 = reshape(%0) {shape = [0,-1,4,16]} : f32[8,32,4,16]      // %0 : f32[8,32,64]
//   %2 = unsqueeze(%1) {axis = [0]} : f32[1,8,32,4,16]
//   %3 = squeeze(%2) {axis = []} : f32[8,32,4,16]                   // [] = every size-1 dim
//   %4 = transpose(%3) {perm = [0,2,1,3]} : f32[8,4,32,16]
#include "ir/ops/shape.h"

#include "absl/strings/str_cat.h"
#include "ir/op_def.h"
#include "ir/ops/op_families.h"
#include "ir/ops/op_helpers.h"
#include "ir/spmd/rules.h"
#include "ir/checked_math.h"
#include "ir/status.h"

namespace pdist::ir {
namespace {

// Paddle's reshape: at most one -1 (inferred from the element count); 0 copies x's dim at the
// same index.
absl::StatusOr<Shape> ReshapeRule(const Shape& x, const AttributeMap& attrs) {
  PDIST_ASSIGN_OR_RETURN(Shape shape, GetIntList(attrs, "shape"));
  int64_t inferred = -1;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (inferred >= 0)
        return absl::InvalidArgumentError(absl::StrCat("shape ", ShapeToString(shape), " has more than one -1"));
      inferred = static_cast<int64_t>(i);
      continue;
    }
    if (shape[i] == 0) {
      if (i >= x.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("shape ", ShapeToString(shape), ": 0 at index ", i, " copies a dim x does not have"));
      }
      shape[i] = x[i];
    } else if (shape[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat("shape ", ShapeToString(shape), " has a negative dim ", shape[i]));
    }
    // Checked: a product that wraps could equal x's element count and pass for a valid reshape.
    const std::optional<int64_t> next = CheckedMul(known, shape[i]);
    if (!next) {
      return absl::InvalidArgumentError(absl::StrCat("shape ", ShapeToString(shape), " has more elements than an int64 holds"));
    }
    known = *next;
  }
  const int64_t count = NumElements(x);
  if (inferred >= 0) {
    if (known == 0 || count % known != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot infer the -1 in ", ShapeToString(shape), " from ", count, " elements"));
    }
    shape[static_cast<size_t>(inferred)] = count / known;
  } else if (known != count) {
    return absl::InvalidArgumentError(
        absl::StrCat("shape ", ShapeToString(shape), " holds ", known, " elements, x holds ", count));
  }
  return shape;
}

// Paddle's unsqueeze: axes are inserted one after the other, each relative to the shape grown so
// far (so [A,B] with axis [0,2] gives [1,A,1,B]).
absl::StatusOr<Shape> UnsqueezeRule(const Shape& x, const AttributeMap& attrs) {
  PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> axis, GetIntList(attrs, "axis"));
  Shape out = x;
  for (int64_t a : axis) {
    const int64_t rank = static_cast<int64_t>(out.size());
    const int64_t at = a < 0 ? a + rank + 1 : a;
    if (at < 0 || at > rank) {
      return absl::InvalidArgumentError(absl::StrCat("axis ", a, " out of range for inserting into rank ", rank));
    }
    out.insert(out.begin() + at, 1);
  }
  return out;
}

// Paddle's squeeze: removes the named size-1 dims (every size-1 dim when axis is empty); a named
// dim whose size is not 1 stays, as in Paddle.
absl::StatusOr<Shape> SqueezeRule(const Shape& x, const AttributeMap& attrs) {
  PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> axis, GetIntList(attrs, "axis"));
  const int64_t rank = static_cast<int64_t>(x.size());
  std::vector<bool> named(x.size(), axis.empty());
  for (int64_t a : axis) {
    PDIST_ASSIGN_OR_RETURN(int64_t i, ops::NormalizeAxis(a, rank));
    if (rank > 0) named[static_cast<size_t>(i)] = true;
  }
  Shape out;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!(named[i] && x[i] == 1)) out.push_back(x[i]);
  }
  return out;
}

// reshape, unsqueeze and squeeze: one attribute, a shape rule, a result that aliases x (no bytes
// move), and a gradient that reshapes out_grad back to x's shape.
using ShapeRule = absl::StatusOr<Shape> (*)(const Shape&, const AttributeMap&);

OpDef ViewOpDef(const std::string& name, AttrSpec attr, ShapeRule rule) {
  const spmd::SpmdRuleFns spmd_rule = spmd::ReshapeLikeRule(
      name, [rule](const std::vector<Shape>& in, const AttributeMap& attrs) -> absl::StatusOr<std::vector<Shape>> {
        PDIST_ASSIGN_OR_RETURN(Shape out, rule(in.at(0), attrs));
        return std::vector<Shape>{out};
      });
  return OpDef{
      .name = name,
      .inputs = {{"x"}},
      .outputs = {{"out"}},
      .attrs = {std::move(attr)},
      .infer_meta = [rule](const InputTypes& in, const AttributeMap& attrs) -> absl::StatusOr<std::vector<TensorType>> {
        PDIST_ASSIGN_OR_RETURN(Shape out, rule(in[0]->shape, attrs));
        return std::vector<TensorType>{{out, in[0]->dtype}};
      },
      .grad = [](Builder& b, const Operation& op,
                 const std::vector<Value*>& out_grads) -> absl::StatusOr<std::vector<Value*>> {
        if (out_grads[0] == nullptr) return std::vector<Value*>{nullptr};
        PDIST_ASSIGN_OR_RETURN(Value * dx, b.Op1("reshape", {out_grads[0]}, {{"shape", op.operand(0)->type().shape}}));
        return std::vector<Value*>{dx};
      },
      .cost = [](const InputTypes&, const std::vector<TensorType>&, const AttributeMap&) { return OpCost{}; },
      .infer_spmd = spmd_rule.infer,
      .infer_spmd_reverse = spmd_rule.reverse,
      .describe_spmd = spmd_rule.describe,
      .view = true,
  };
}

// perm, normalised (negative entries count from the end) and checked to be a permutation.
absl::StatusOr<std::vector<int64_t>> Permutation(int64_t rank, const AttributeMap& attrs) {
  PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> perm, GetIntList(attrs, "perm"));
  if (static_cast<int64_t>(perm.size()) != rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("perm ", ShapeToString(perm), " has ", perm.size(), " entries, x has rank ", rank));
  }
  std::vector<bool> seen(perm.size(), false);
  for (int64_t& p : perm) {
    PDIST_ASSIGN_OR_RETURN(p, ops::NormalizeAxis(p, rank));
    if (seen[static_cast<size_t>(p)]) {
      return absl::InvalidArgumentError(absl::StrCat("perm ", ShapeToString(perm), " names axis ", p, " twice"));
    }
    seen[static_cast<size_t>(p)] = true;
  }
  return perm;
}

absl::StatusOr<std::vector<TensorType>> TransposeMeta(const InputTypes& in, const AttributeMap& attrs) {
  PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> perm, Permutation(in[0]->rank(), attrs));
  TensorType out{{}, in[0]->dtype};
  for (int64_t p : perm) out.shape.push_back(in[0]->shape[static_cast<size_t>(p)]);
  return std::vector<TensorType>{out};
}

// The gradient of a transpose is the transpose by the inverse permutation.
absl::StatusOr<std::vector<Value*>> TransposeGrad(Builder& b, const Operation& op,
                                                  const std::vector<Value*>& out_grads) {
  if (out_grads[0] == nullptr) return std::vector<Value*>{nullptr};
  PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> perm, Permutation(op.operand(0)->type().rank(), op.attrs()));
  std::vector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  PDIST_ASSIGN_OR_RETURN(Value * dx, b.Op1("transpose", {out_grads[0]}, {{"perm", inverse}}));
  return std::vector<Value*>{dx};
}

}  // namespace

absl::Status RegisterShapeOps(OpRegistry& registry) {
  const spmd::SpmdRuleFns transpose_rule = spmd::TransposeRule();
  OpDef reshape = ViewOpDef("reshape", {"shape", std::vector<int64_t>{}}, ReshapeRule);
  reshape.result_shape_attr = "shape";
  PDIST_RETURN_IF_ERROR(registry.Register(std::move(reshape)));
  PDIST_RETURN_IF_ERROR(registry.Register(ViewOpDef("unsqueeze", {"axis", std::vector<int64_t>{}}, UnsqueezeRule)));
  PDIST_RETURN_IF_ERROR(registry.Register(ViewOpDef("squeeze", {"axis", std::vector<int64_t>{}}, SqueezeRule)));
  PDIST_RETURN_IF_ERROR(registry.Register(OpDef{
      .name = "transpose",
      .inputs = {{"x"}},
      .outputs = {{"out"}},
      .attrs = {{"perm", std::vector<int64_t>{}}},
      .infer_meta = TransposeMeta,
      .grad = TransposeGrad,
      .cost =
          [](const InputTypes& in, const std::vector<TensorType>& out, const AttributeMap&) {
            return OpCost{0, ops::TotalBytes(in, out)};
          },
      .infer_spmd = transpose_rule.infer,
      .infer_spmd_reverse = transpose_rule.reverse,
      .describe_spmd = transpose_rule.describe,
  }));
  return ops::RegisterSlicingOps(registry);
}

}  // namespace pdist::ir
