// ONNX shape, constant and indexing operators as pdist ops — or, when every input is known at
// import time (shape arithmetic: Shape → Gather → Unsqueeze → Concat → Reshape), folded into
// known numbers that never become program values.
//
//   Reshape(x, [0, 8, -1]) → reshape {shape = [x.shape[0], 8, ...]}   (0 and -1 resolved here)
//   Gather(table, ids)     → embedding(ids, table)                      (a 2-D float table, axis 0)
//   Identity(initializer)  → a parameter of its own (see ImportContext::DefineCopyOfInitializer)
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "import/onnx_context.h"
#include "ir/ops/op_helpers.h"
#include "ir/status.h"
#include "ir/verifier.h"

namespace pdist::onnx_import {

namespace {

absl::StatusOr<int64_t> Axis(const onnx::NodeProto& node, int64_t axis, int64_t rank) {
  absl::StatusOr<int64_t> a = ir::ops::NormalizeAxis(axis, rank);
  if (!a.ok()) return absl::InvalidArgumentError(absl::StrCat(Describe(node), ": ", a.status().message()));
  return a;
}

std::vector<double> Values(const OnnxTensor& t) {
  std::vector<double> out;
  for (int64_t i = 0; i < t.num_elements(); ++i) out.push_back(t.At(i));
  return out;
}

// Known numbers are folded only when they are not an initializer (a parameter stays one) and
// not 16-bit floats (nothing folds those).
const OnnxTensor* Foldable(ImportContext& ctx, const onnx::NodeProto& node, int i) {
  const OnnxTensor* t = ctx.Known(node, i);
  if (t == nullptr || ctx.IsInitializer(node.input(i)) || t->type.dtype == ir::DataType::kFloat16 ||
      t->type.dtype == ir::DataType::kBFloat16) {
    return nullptr;
  }
  return t;
}

absl::Status Define1(ImportContext& ctx, const onnx::NodeProto& node, absl::StatusOr<ir::Value*> y) {
  if (!y.ok()) return y.status();
  ctx.Define(node.output(0), *y);
  return absl::OkStatus();
}

// The type of input `i` without materialising known numbers.
absl::StatusOr<ir::TensorType> TypeOf(ImportContext& ctx, const onnx::NodeProto& node, int i) {
  if (const OnnxTensor* t = ctx.Known(node, i)) return t->type;
  PDIST_ASSIGN_OR_RETURN(ir::Value * v, ctx.Input(node, i));
  return v->type();
}

absl::Status Constant(ImportContext& ctx, const onnx::NodeProto& node) {
  if (node.attribute_size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(Describe(node), " must have exactly one value attribute"));
  }
  const onnx::AttributeProto& a = node.attribute(0);
  const ir::DataType f32 = ir::DataType::kFloat32, i64 = ir::DataType::kInt64;
  if (a.name() == "value") {
    PDIST_ASSIGN_OR_RETURN(OnnxTensor t, ReadOnnxTensor(a.t()));
    ctx.DefineKnown(node.output(0), std::move(t));
  } else if (a.name() == "value_float") {
    ctx.DefineKnown(node.output(0), MakeOnnxTensor({{}, f32}, {a.f()}));
  } else if (a.name() == "value_int") {
    ctx.DefineKnown(node.output(0), MakeOnnxTensor({{}, i64}, {static_cast<double>(a.i())}));
  } else if (a.name() == "value_floats") {
    ctx.DefineKnown(node.output(0), MakeOnnxTensor({{a.floats_size()}, f32}, std::vector<double>(a.floats().begin(), a.floats().end())));
  } else if (a.name() == "value_ints") {
    ctx.DefineKnown(node.output(0), MakeOnnxTensor({{a.ints_size()}, i64}, std::vector<double>(a.ints().begin(), a.ints().end())));
  } else {
    return absl::UnimplementedError(absl::StrCat(Describe(node), ": pdist does not import a Constant's '", a.name(), "'"));
  }
  return absl::OkStatus();
}

absl::Status ConstantOfShape(ImportContext& ctx, const onnx::NodeProto& node) {
  PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ctx.KnownInts(node, 0, "shape"));
  OnnxTensor fill = MakeOnnxTensor({{1}, ir::DataType::kFloat32}, {0.0});
  if (const onnx::AttributeProto* a = FindAttr(node, "value")) {
    PDIST_ASSIGN_OR_RETURN(fill, ReadOnnxTensor(a->t()));
  }
  const ir::TensorType type{ir::Shape(shape.begin(), shape.end()), fill.type.dtype};
  PDIST_RETURN_IF_ERROR(ir::CheckTensorType(type));
  // Its numbers are made here, before any program runs: a shape read from the file must not
  // allocate gigabytes.
  constexpr int64_t kMaxElements = int64_t{1} << 24;
  if (type.num_elements() > kMaxElements) {
    return absl::InvalidArgumentError(absl::StrCat(Describe(node), ": a constant of ", type.ToString(), " is more than the ",
                                                   kMaxElements, " elements pdist makes at import"));
  }
  ctx.DefineKnown(node.output(0), MakeOnnxTensor(type, std::vector<double>(static_cast<size_t>(type.num_elements()), fill.At(0))));
  return absl::OkStatus();
}

absl::Status Identity(ImportContext& ctx, const onnx::NodeProto& node) {
  if (ctx.IsInitializer(node.input(0))) return ctx.DefineCopyOfInitializer(node.output(0), node.input(0));
  if (const OnnxTensor* t = ctx.Known(node, 0)) {
    ctx.DefineKnown(node.output(0), *t);
    return absl::OkStatus();
  }
  return Define1(ctx, node, ctx.Input(node, 0));
}

absl::Status Cast(ImportContext& ctx, const onnx::NodeProto& node) {
  PDIST_ASSIGN_OR_RETURN(ir::DataType to, DataTypeOfOnnx(static_cast<int32_t>(IntAttr(node, "to", 0))));
  if (const OnnxTensor* t = Foldable(ctx, node, 0); t != nullptr && to != ir::DataType::kFloat16 && to != ir::DataType::kBFloat16) {
    ctx.DefineKnown(node.output(0), MakeOnnxTensor({t->type.shape, to}, Values(*t)));
    return absl::OkStatus();
  }
  PDIST_ASSIGN_OR_RETURN(ir::Value * x, ctx.Input(node, 0));
  if (x->type().dtype == to) return Define1(ctx, node, x);
  return Define1(ctx, node, ctx.Op1(node, "cast", {x}, {{"dtype", to}}));
}

absl::Status Shape(ImportContext& ctx, const onnx::NodeProto& node) {
  PDIST_ASSIGN_OR_RETURN(ir::TensorType type, TypeOf(ctx, node, 0));
  const int64_t rank = type.rank();
  int64_t start = IntAttr(node, "start", 0), end = IntAttr(node, "end", rank);
  start = std::clamp(start < 0 ? start + rank : start, int64_t{0}, rank);
  end = std::clamp(end < 0 ? end + rank : end, int64_t{0}, rank);
  std::vector<double> dims;
  for (int64_t d = start; d < end; ++d) dims.push_back(static_cast<double>(type.shape[static_cast<size_t>(d)]));
  ctx.DefineKnown(node.output(0), MakeOnnxTensor({{static_cast<int64_t>(dims.size())}, ir::DataType::kInt64}, dims));
  return absl::OkStatus();
}

absl::Status Reshape(ImportContext& ctx, const onnx::NodeProto& node) {
  PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> target, ctx.KnownInts(node, 1, "shape"));
  PDIST_ASSIGN_OR_RETURN(ir::TensorType in, TypeOf(ctx, node, 0));
  const bool allow_zero = IntAttr(node, "allowzero", 0) != 0;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == 0 && !allow_zero) {
      if (i >= in.shape.size()) return absl::InvalidArgumentError(absl::StrCat(Describe(node), ": shape[", i, "] = 0 copies a dimension x does not have"));
      target[i] = in.shape[i];
    }
    if (target[i] == -1) {
      if (infer >= 0) return absl::InvalidArgumentError(absl::StrCat(Describe(node), ": shape has two -1 entries"));
      infer = static_cast<int64_t>(i);
    } else if (target[i] < 0 || __builtin_mul_overflow(known, target[i], &known)) {
      return absl::InvalidArgumentError(absl::StrCat(Describe(node), ": shape [", absl::StrJoin(target, ","),
                                                     "] is not a shape of ", in.ToString()));
    }
  }
  if (infer >= 0) {
    if (known == 0 || in.num_elements() % known != 0) {
      return absl::InvalidArgumentError(absl::StrCat(Describe(node), ": cannot reshape ", in.ToString(), " to [",
                                                     absl::StrJoin(target, ","), "]"));
    }
    target[static_cast<size_t>(infer)] = in.num_elements() / known;
  } else if (known != in.num_elements()) {
    return absl::InvalidArgumentError(absl::StrCat(Describe(node), ": cannot reshape ", in.ToString(), " (",
                                                   in.num_elements(), " elements) to [", absl::StrJoin(target, ","), "]"));
  }
  if (const OnnxTensor* t = Foldable(ctx, node, 0)) {
    ctx.DefineKnown(node.output(0), MakeOnnxTensor({ir::Shape(target.begin(), target.end()), t->type.dtype}, Values(*t)));
    return absl::OkStatus();
  }
  if (std::find(target.begin(), target.end(), 0) != target.end()) {
    return absl::UnimplementedError(absl::StrCat(Describe(node), ": the target shape [", absl::StrJoin(target, ","),
                                                 "] has a 0 dimension, which pdist's reshape reads as 'copy x's "
                                                 "dimension' (Paddle's convention)"));
  }
  PDIST_ASSIGN_OR_RETURN(ir::Value * x, ctx.Input(node, 0));
  return Define1(ctx, node, ctx.Op1(node, "reshape", {x}, {{"shape", target}}));
}

absl::Status Transpose(ImportContext& ctx, const onnx::NodeProto& node) {
  PDIST_ASSIGN_OR_RETURN(ir::Value * x, ctx.Input(node, 0));
  std::vector<int64_t> perm(static_cast<size_t>(x->type().rank()));
  std::iota(perm.rbegin(), perm.rend(), 0);  // ONNX's default: reverse the axes
  if (std::optional<std::vector<int64_t>> given = IntsAttr(node, "perm")) perm = *given;
  return Define1(ctx, node, ctx.Op1(node, "transpose", {x}, {{"perm", perm}}));
}

// Squeeze and Unsqueeze: ONNX's axes index the output (Unsqueeze) or the input (Squeeze). One
// axis is pdist's squeeze/unsqueeze; several are one reshape to the shape ONNX defines; known
// numbers take the new shape without an op.
absl::Status SqueezeOrUnsqueeze(ImportContext& ctx, const onnx::NodeProto& node, bool squeeze) {
  std::vector<int64_t> axes;
  if (ctx.HasInput(node, 1)) {
    PDIST_ASSIGN_OR_RETURN(axes, ctx.KnownInts(node, 1, "axes"));
  }
  PDIST_ASSIGN_OR_RETURN(ir::TensorType in, TypeOf(ctx, node, 0));
  if (squeeze && axes.empty()) {
    for (int64_t d = 0; d < in.rank(); ++d) {
      if (in.shape[static_cast<size_t>(d)] == 1) axes.push_back(d);
    }
  }
  const int64_t rank = squeeze ? in.rank() : in.rank() + static_cast<int64_t>(axes.size());
  std::vector<bool> listed(static_cast<size_t>(rank), false);
  for (int64_t& a : axes) {
    PDIST_ASSIGN_OR_RETURN(a, Axis(node, a, rank));
    if (listed[static_cast<size_t>(a)]) return absl::InvalidArgumentError(absl::StrCat(Describe(node), ": axis ", a, " is named twice"));
    if (squeeze && in.shape[static_cast<size_t>(a)] != 1) {
      return absl::InvalidArgumentError(absl::StrCat(Describe(node), ": axis ", a, " of ", in.ToString(), " is not 1"));
    }
    listed[static_cast<size_t>(a)] = true;
  }
  ir::Shape shape;
  for (int64_t d = 0, from = 0; d < rank; ++d) {
    if (squeeze && listed[static_cast<size_t>(d)]) continue;
    shape.push_back(!squeeze && listed[static_cast<size_t>(d)] ? 1 : in.shape[static_cast<size_t>(squeeze ? d : from++)]);
  }
  if (const OnnxTensor* t = Foldable(ctx, node, 0)) {
    ctx.DefineKnown(node.output(0), MakeOnnxTensor({shape, t->type.dtype}, Values(*t)));
    return absl::OkStatus();
  }
  PDIST_ASSIGN_OR_RETURN(ir::Value * x, ctx.Input(node, 0));
  if (axes.size() == 1) return Define1(ctx, node, ctx.Op1(node, squeeze ? "squeeze" : "unsqueeze", {x}, {{"axis", axes}}));
  return Define1(ctx, node, ctx.Op1(node, "reshape", {x}, {{"shape", std::vector<int64_t>(shape.begin(), shape.end())}}));
}

absl::Status Concat(ImportContext& ctx, const onnx::NodeProto& node) {
  const int64_t axis = IntAttr(node, "axis", 0);
  bool all_known = true;
  for (int i = 0; i < node.input_size(); ++i) {
    const OnnxTensor* t = Foldable(ctx, node, i);
    all_known = all_known && t != nullptr && t->type.rank() == 1;
  }
  if (all_known) {  // shape vectors
    std::vector<double> values;
    for (int i = 0; i < node.input_size(); ++i) {
      for (double v : Values(*ctx.Known(node, i))) values.push_back(v);
    }
    ctx.DefineKnown(node.output(0), MakeOnnxTensor({{static_cast<int64_t>(values.size())}, ctx.Known(node, 0)->type.dtype}, values));
    return absl::OkStatus();
  }
  std::vector<ir::Value*> xs;
  for (int i = 0; i < node.input_size(); ++i) {
    PDIST_ASSIGN_OR_RETURN(ir::Value * x, ctx.Input(node, i));
    xs.push_back(x);
  }
  return Define1(ctx, node, ctx.Op1(node, "concat", xs, {{"axis", axis}}));
}

absl::Status Split(ImportContext& ctx, const onnx::NodeProto& node) {
  PDIST_ASSIGN_OR_RETURN(ir::Value * x, ctx.Input(node, 0));
  const int64_t axis = IntAttr(node, "axis", 0);
  std::vector<ir::Value*> parts;
  if (ctx.HasInput(node, 1)) {
    PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> sections, ctx.KnownInts(node, 1, "split"));
    PDIST_ASSIGN_OR_RETURN(parts, ctx.Create(node, "split", {x}, {{"sections", sections}, {"axis", axis}}));
  } else {
    // Equal parts, one per output (opset 18's num_outputs says the same). ONNX lets the last
    // part be smaller; pdist's split_with_num needs equal parts and says so.
    PDIST_ASSIGN_OR_RETURN(parts, ctx.Create(node, "split_with_num", {x}, {{"num", int64_t{node.output_size()}}, {"axis", axis}}));
  }
  if (static_cast<int>(parts.size()) != node.output_size()) {
    return absl::InvalidArgumentError(absl::StrCat(Describe(node), " has ", node.output_size(), " outputs for ", parts.size(), " parts"));
  }
  for (int i = 0; i < node.output_size(); ++i) ctx.Define(node.output(i), parts[static_cast<size_t>(i)]);
  return absl::OkStatus();
}

absl::Status Slice(ImportContext& ctx, const onnx::NodeProto& node) {
  PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> starts, ctx.KnownInts(node, 1, "starts"));
  PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> ends, ctx.KnownInts(node, 2, "ends"));
  std::vector<int64_t> axes(starts.size());
  std::iota(axes.begin(), axes.end(), 0);
  if (ctx.HasInput(node, 3)) {
    PDIST_ASSIGN_OR_RETURN(axes, ctx.KnownInts(node, 3, "axes"));
  }
  if (ctx.HasInput(node, 4)) {
    PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> steps, ctx.KnownInts(node, 4, "steps"));
    for (int64_t s : steps) {
      if (s != 1) return absl::UnimplementedError(absl::StrCat(Describe(node), ": pdist slices with step 1 only, got ", s));
    }
  }
  if (const OnnxTensor* t = Foldable(ctx, node, 0); t != nullptr && t->type.rank() == 1 && axes.size() == 1) {
    const int64_t n = t->num_elements();
    const int64_t b = std::clamp(starts[0] < 0 ? starts[0] + n : starts[0], int64_t{0}, n);
    const int64_t e = std::clamp(ends[0] < 0 ? ends[0] + n : ends[0], int64_t{0}, n);
    std::vector<double> all = Values(*t), out;
    for (int64_t i = b; i < e; ++i) out.push_back(all[static_cast<size_t>(i)]);
    ctx.DefineKnown(node.output(0), MakeOnnxTensor({{static_cast<int64_t>(out.size())}, t->type.dtype}, out));
    return absl::OkStatus();
  }
  PDIST_ASSIGN_OR_RETURN(ir::Value * x, ctx.Input(node, 0));
  return Define1(ctx, node, ctx.Op1(node, "slice", {x}, {{"axes", axes}, {"starts", starts}, {"ends", ends}}));
}

// Gather of known numbers (shape arithmetic); a row lookup in a 2-D float table (a token
// embedding) as pdist's embedding, which tensor parallelism shards by vocabulary; any other as
// pdist's gather.
absl::Status Gather(ImportContext& ctx, const onnx::NodeProto& node) {
  const int64_t axis = IntAttr(node, "axis", 0);
  const OnnxTensor* data = Foldable(ctx, node, 0);
  const OnnxTensor* indices = ctx.Known(node, 1);
  if (data != nullptr && indices != nullptr && data->type.rank() == 1) {
    PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> at, ctx.KnownInts(node, 1, "indices"));
    std::vector<double> all = Values(*data), out;
    for (int64_t i : at) {
      if (i < -data->num_elements() || i >= data->num_elements()) {
        return absl::InvalidArgumentError(absl::StrCat(Describe(node), ": index ", i, " out of range for ", data->num_elements(), " elements"));
      }
      out.push_back(all[static_cast<size_t>(i < 0 ? i + data->num_elements() : i)]);
    }
    ctx.DefineKnown(node.output(0), MakeOnnxTensor({indices->type.shape, data->type.dtype}, out));
    return absl::OkStatus();
  }
  PDIST_ASSIGN_OR_RETURN(ir::TensorType table, TypeOf(ctx, node, 0));
  PDIST_ASSIGN_OR_RETURN(ir::Value * x, ctx.Input(node, 0));
  PDIST_ASSIGN_OR_RETURN(ir::Value * index, ctx.Input(node, 1));
  // A table lookup is an embedding (its vocab-parallel rule, its sparse gradient), whose ids are
  // in [0, rows); ONNX's Gather also counts a negative index from the end, which gather does:
  // a constant index with one (table[-1]) imported as an embedding failed its first step.
  bool counts_from_end = false;
  if (indices != nullptr) {
    PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> at, ctx.KnownInts(node, 1, "indices"));
    for (int64_t i : at) counts_from_end = counts_from_end || i < 0;
  }
  if (axis == 0 && table.rank() == 2 && ir::IsFloatingPoint(table.dtype) && !counts_from_end) {
    return Define1(ctx, node, ctx.Op1(node, "embedding", {index, x}));
  }
  return Define1(ctx, node, ctx.Op1(node, "gather", {x, index}, {{"axis", axis}}));
}

// Expand's shape broadcasts with x's both ways (numpy): out is their broadcast.
absl::Status Expand(ImportContext& ctx, const onnx::NodeProto& node) {
  PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ctx.KnownInts(node, 1, "shape"));
  PDIST_ASSIGN_OR_RETURN(ir::Value * x, ctx.Input(node, 0));
  absl::StatusOr<ir::Shape> out = ir::ops::BroadcastShapes(x->type().shape, ir::Shape(shape.begin(), shape.end()));
  if (!out.ok()) return absl::InvalidArgumentError(absl::StrCat(Describe(node), ": ", out.status().message()));
  if (*out == x->type().shape) return Define1(ctx, node, x);
  return Define1(ctx, node, ctx.Op1(node, "expand", {x}, {{"shape", std::vector<int64_t>(out->begin(), out->end())}}));
}

absl::Status Where(ImportContext& ctx, const onnx::NodeProto& node) {
  PDIST_ASSIGN_OR_RETURN(ir::Value * condition, ctx.Input(node, 0));
  PDIST_ASSIGN_OR_RETURN(ir::Value * x, ctx.Input(node, 1));
  PDIST_ASSIGN_OR_RETURN(ir::Value * y, ctx.Input(node, 2));
  return Define1(ctx, node, ctx.Op1(node, "where", {condition, x, y}));
}

}  // namespace

void AddShapeConverters(ConverterMap& map) {
  map["Expand"] = Expand;
  map["Where"] = Where;
  map["Constant"] = Constant;
  map["ConstantOfShape"] = ConstantOfShape;
  map["Identity"] = Identity;
  map["Cast"] = Cast;
  map["Shape"] = Shape;
  map["Reshape"] = Reshape;
  map["Transpose"] = Transpose;
  map["Squeeze"] = [](ImportContext& ctx, const onnx::NodeProto& node) { return SqueezeOrUnsqueeze(ctx, node, true); };
  map["Unsqueeze"] = [](ImportContext& ctx, const onnx::NodeProto& node) { return SqueezeOrUnsqueeze(ctx, node, false); };
  map["Concat"] = Concat;
  map["Split"] = Split;
  map["Slice"] = Slice;
  map["Gather"] = Gather;
}

}  // namespace pdist::onnx_import
