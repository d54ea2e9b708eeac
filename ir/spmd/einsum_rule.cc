// EinsumRule evaluation: forward (merge inputs), reverse (merge outputs), the printed form.
#include "ir/spmd/einsum_rule.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/status.h"

namespace pdist::ir::spmd {
namespace {

constexpr char kAbsent[] = "_";

bool IsAbsent(const std::string& axes) { return axes == kAbsent; }

const char* ReduceSuffix(ReduceType type) {
  switch (type) {
    case ReduceType::kSum:
      return "";
    case ReduceType::kAvg:
      return "(avg)";
    case ReduceType::kMax:
      return "(max)";
  }
  return "";
}

// `axes` with the letters of `replicated` written as '1', so that merging never shards them.
std::string MergeAxes(const std::string& axes, const std::string& replicated) {
  std::string out = axes;
  for (char& c : out) {
    if (replicated.find(c) != std::string::npos) c = '1';
  }
  return out;
}

std::string NameOf(const std::vector<std::string>& names, size_t i, const char* fallback) {
  return i < names.size() ? names[i] : absl::StrCat(fallback, i);
}

absl::Status CheckSpecs(const EinsumRule& rule, const std::vector<std::string>& axes,
                        const std::vector<std::string>& names, const std::vector<TensorDistSpec>& specs,
                        const SpmdContext& ctx, const char* what) {
  if (specs.size() != axes.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(rule.op, ": expected ", axes.size(), " ", what, ", got ", specs.size()));
  }
  PDIST_RETURN_IF_ERROR(WithContext(ValidateSpecs(specs, ctx.mesh_shape, what), rule.op));
  for (size_t i = 0; i < specs.size(); ++i) {
    if (IsAbsent(axes[i])) continue;
    const std::string name = NameOf(names, i, what[0] == 'i' ? "in" : "out");
    PDIST_RETURN_IF_ERROR(CheckRank(rule.op, name.c_str(), i, specs[i], axes[i]));
  }
  return absl::OkStatus();
}

// Letter → size over the present inputs (the largest, so broadcasting picks the real size).
std::map<char, int64_t> LetterSizes(const EinsumRule& rule, const std::vector<TensorDistSpec>& inputs) {
  std::map<char, int64_t> sizes;
  for (size_t i = 0; i < rule.inputs.size(); ++i) {
    const std::string& axes = rule.inputs[i];
    if (IsAbsent(axes)) continue;
    for (size_t a = 0; a < axes.size() && a < inputs[i].shape.size(); ++a) {
      if (axes[a] != '1') sizes[axes[a]] = std::max(sizes[axes[a]], inputs[i].shape[a]);
    }
  }
  return sizes;
}

// An output's shape: given by the rule, or from its letters' sizes; a letter no input has (each
// of its dims had size 1 and was written '1') has size 1.
Shape OutputShape(const EinsumRule& rule, size_t j, const std::map<char, int64_t>& sizes) {
  if (j < rule.output_shapes.size()) return rule.output_shapes[j];
  Shape shape;
  for (char c : rule.outputs[j]) {
    auto it = sizes.find(c);
    shape.push_back(c == '1' || it == sizes.end() ? 1 : it->second);
  }
  return shape;
}

// The Partial dims that pass to the outputs; fills the partial each input keeps.
PartialDims PassPartial(const EinsumRule& rule, const std::vector<TensorDistSpec>& inputs, const AxisShardings& merged,
                        std::vector<PartialDims>& kept) {
  std::set<int64_t> used;
  for (const auto& [letter, mesh_dim] : merged) {
    if (mesh_dim >= 0) used.insert(mesh_dim);
  }
  std::set<int64_t> partial_dims;
  for (const TensorDistSpec& spec : inputs) {
    for (const auto& [d, type] : spec.partial) partial_dims.insert(d);
  }
  std::vector<int> linear;
  for (int i : rule.partial.linear) {
    if (i >= 0 && static_cast<size_t>(i) < inputs.size() && !IsAbsent(rule.inputs[i])) linear.push_back(i);
  }
  const auto passes = [&](ReduceType t) {
    return std::find(rule.partial.passes.begin(), rule.partial.passes.end(), t) != rule.partial.passes.end();
  };
  PartialDims passed;
  for (int64_t d : partial_dims) {
    if (used.count(d) || linear.empty()) continue;
    if (rule.partial.mode == PartialPolicy::Mode::kAlike) {
      auto first = inputs[linear[0]].partial.find(d);
      if (first == inputs[linear[0]].partial.end() || !passes(first->second)) continue;
      const ReduceType t = first->second;
      const bool alike = std::all_of(linear.begin(), linear.end(), [&](int i) {
        auto it = inputs[i].partial.find(d);
        return it != inputs[i].partial.end() && it->second == t;
      });
      if (!alike) continue;
      passed[d] = t;
      for (int i : linear) kept[i][d] = t;
    } else {
      for (int i : linear) {
        auto it = inputs[i].partial.find(d);
        if (it == inputs[i].partial.end() || !passes(it->second)) continue;
        passed[d] = it->second;
        kept[i][d] = it->second;
        break;
      }
    }
  }
  return passed;
}

}  // namespace

absl::StatusOr<SpmdResult> InferEinsum(const EinsumRule& rule, const std::vector<TensorDistSpec>& inputs,
                                       const SpmdContext& ctx) {
  PDIST_RETURN_IF_ERROR(CheckSpecs(rule, rule.inputs, rule.input_names, inputs, ctx, "inputs"));
  AxisShardings merged;
  if (rule.align) {
    std::vector<AxesTensor> tensors;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!IsAbsent(rule.inputs[i])) tensors.push_back({rule.inputs[i], inputs[i].shape, inputs[i].dims_mapping});
    }
    merged = AlignAxisShardings(tensors, ctx.mesh_shape, rule.replicated);
  } else {
    std::vector<int> order = rule.merge_order;
    if (order.empty()) {
      for (size_t i = 0; i < inputs.size(); ++i) order.push_back(static_cast<int>(i));
    }
    std::vector<std::pair<std::string, DimsMapping>> pairs;
    for (int i : order) {
      if (!IsAbsent(rule.inputs[i]))
        pairs.emplace_back(MergeAxes(rule.inputs[i], rule.replicated), inputs[i].dims_mapping);
    }
    merged = MergeAxisShardings(pairs);
  }

  SpmdResult result;
  std::vector<PartialDims> kept(inputs.size());
  const PartialDims passed = PassPartial(rule, inputs, merged, kept);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (IsAbsent(rule.inputs[i])) {
      result.inputs.push_back(inputs[i]);
      continue;
    }
    result.inputs.push_back(
        {inputs[i].shape, MappingForAxes(MergeAxes(rule.inputs[i], rule.replicated), merged), kept[i]});
  }
  const std::map<char, int64_t> sizes = LetterSizes(rule, inputs);
  for (size_t j = 0; j < rule.outputs.size(); ++j) {
    Shape shape = OutputShape(rule, j, sizes);
    const std::string axes = MergeAxes(rule.outputs[j], rule.replicated);
    PartialDims partial = PartialForMissingAxes(axes, merged, rule.contracted);
    partial.insert(passed.begin(), passed.end());
    result.outputs.push_back({std::move(shape), MappingForAxes(axes, merged), std::move(partial)});
  }
  return result;
}

absl::StatusOr<SpmdResult> InferEinsumReverse(const EinsumRule& rule, const std::vector<TensorDistSpec>& inputs,
                                              const std::vector<TensorDistSpec>& outputs, const SpmdContext& ctx) {
  PDIST_RETURN_IF_ERROR(CheckSpecs(rule, rule.inputs, rule.input_names, inputs, ctx, "inputs"));
  PDIST_RETURN_IF_ERROR(CheckSpecs(rule, rule.outputs, rule.output_names, outputs, ctx, "outputs"));
  std::vector<std::pair<std::string, DimsMapping>> pairs;
  for (size_t j = 0; j < outputs.size(); ++j) {
    pairs.emplace_back(MergeAxes(rule.outputs[j], rule.replicated), outputs[j].dims_mapping);
  }
  const AxisShardings merged = MergeAxisShardings(pairs);
  SpmdResult result;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (IsAbsent(rule.inputs[i])) {
      result.inputs.push_back(inputs[i]);
      continue;
    }
    result.inputs.push_back({inputs[i].shape, MappingForAxes(MergeAxes(rule.inputs[i], rule.replicated), merged), {}});
  }
  for (size_t j = 0; j < outputs.size(); ++j) {
    result.outputs.push_back(
        {outputs[j].shape, MappingForAxes(MergeAxes(rule.outputs[j], rule.replicated), merged), {}});
  }
  return result;
}

std::string DescribeEinsum(const EinsumRule& rule) {
  std::string text = absl::StrCat(absl::StrJoin(rule.inputs, ","), "->", absl::StrJoin(rule.outputs, ","));
  // Shardable input letters in order of first appearance.
  std::string letters;
  for (const std::string& axes : rule.inputs) {
    if (IsAbsent(axes)) continue;
    for (char c : MergeAxes(axes, rule.replicated)) {
      if (c != '1' && letters.find(c) == std::string::npos) letters.push_back(c);
    }
  }
  std::vector<std::string> missing;
  for (const std::string& out : rule.outputs) {
    std::string m;
    for (char c : letters) {
      if (out.find(c) == std::string::npos) m.push_back(c);
    }
    missing.push_back(m);
  }
  const bool same = std::all_of(missing.begin(), missing.end(), [&](const std::string& m) { return m == missing[0]; });
  const char* suffix = ReduceSuffix(rule.contracted);
  for (size_t j = 0; j < missing.size(); ++j) {
    if (missing[j].empty()) continue;
    if (same) {
      absl::StrAppend(&text, "  ", missing[j], "→Partial", suffix);
      break;
    }
    absl::StrAppend(&text, "  ", NameOf(rule.output_names, j, "out"), ": ", missing[j], "→Partial", suffix);
  }
  if (!rule.replicated.empty()) absl::StrAppend(&text, "  ", rule.replicated, "→Replicate");
  std::vector<std::string> linear;
  for (int i : rule.partial.linear) linear.push_back(NameOf(rule.input_names, static_cast<size_t>(i), "in"));
  if (!linear.empty()) {
    std::vector<std::string> types;
    for (ReduceType t : rule.partial.passes) types.push_back(ReduceTypeName(t));
    std::string type_text = absl::StrJoin(types, ",");
    type_text = type_text == "sum,avg" ? "" : type_text == "sum,avg,max" ? "(any)" : absl::StrCat("(", type_text, ")");
    const char* sep = rule.partial.mode == PartialPolicy::Mode::kAlike ? "&" : "|";
    absl::StrAppend(&text, "  pass P", type_text, ": ", absl::StrJoin(linear, sep));
  }
  return text;
}

SpmdRuleFns EinsumRuleFns(EinsumBuilder build) {
  SpmdRuleFns fns;
  fns.infer = [build](const std::vector<TensorDistSpec>& inputs, const SpmdContext& ctx) -> absl::StatusOr<SpmdResult> {
    PDIST_ASSIGN_OR_RETURN(EinsumRule rule, build(ShapesOf(inputs), ctx.attrs));
    return InferEinsum(rule, inputs, ctx);
  };
  fns.reverse = [build](const std::vector<TensorDistSpec>& inputs, const std::vector<TensorDistSpec>& outputs,
                        const SpmdContext& ctx) -> absl::StatusOr<SpmdResult> {
    PDIST_ASSIGN_OR_RETURN(EinsumRule rule, build(ShapesOf(inputs), ctx.attrs));
    return InferEinsumReverse(rule, inputs, outputs, ctx);
  };
  fns.describe = [build](const std::vector<const TensorType*>& inputs, const AttributeMap& attrs) -> std::string {
    absl::StatusOr<EinsumRule> rule = build(ShapesOf(inputs), attrs);
    if (!rule.ok()) return absl::StrCat("<error: ", rule.status().message(), ">");
    return DescribeEinsum(*rule);
  };
  return fns;
}

std::string Letters(int64_t rank) {
  static const std::string kAlphabet = "abcdefghijklmnopqrstuvwxyz";
  return kAlphabet.substr(0, static_cast<size_t>(std::clamp<int64_t>(rank, 0, 26)));
}

std::string MarkSizeOne(std::string axes, const Shape& shape) {
  for (size_t i = 0; i < axes.size() && i < shape.size(); ++i) {
    if (shape[i] == 1) axes[i] = '1';
  }
  return axes;
}

std::vector<Shape> ShapesOf(const std::vector<TensorDistSpec>& specs) {
  std::vector<Shape> shapes;
  for (const TensorDistSpec& s : specs) shapes.push_back(s.shape);
  return shapes;
}

std::vector<Shape> ShapesOf(const std::vector<const TensorType*>& types) {
  std::vector<Shape> shapes;
  for (const TensorType* t : types) shapes.push_back(t ? t->shape : Shape{0});
  return shapes;
}

TensorDistSpec WithoutPartial(TensorDistSpec spec) {
  spec.partial.clear();
  return spec;
}

absl::StatusOr<bool> BoolAttr(const AttributeMap& attrs, const std::string& name, bool fallback) {
  return attrs.count(name) ? GetBool(attrs, name) : fallback;
}

absl::StatusOr<int64_t> IntAttr(const AttributeMap& attrs, const std::string& name, int64_t fallback) {
  return attrs.count(name) ? GetInt(attrs, name) : fallback;
}

absl::StatusOr<double> DoubleAttr(const AttributeMap& attrs, const std::string& name, double fallback) {
  return attrs.count(name) ? GetDouble(attrs, name) : fallback;
}

absl::StatusOr<std::vector<int64_t>> IntListAttr(const AttributeMap& attrs, const std::string& name,
                                                 std::vector<int64_t> fallback) {
  if (attrs.count(name)) return GetIntList(attrs, name);
  return fallback;
}

absl::Status CheckInputCount(const std::string& op, const std::vector<Shape>& in, size_t count) {
  if (in.size() == count) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(op, ": expected ", count, " inputs, got ", in.size()));
}

absl::Status CheckRank(const std::string& op, const char* what, size_t index, const TensorDistSpec& spec,
                       const std::string& axes) {
  if (spec.shape.size() == axes.size() && spec.dims_mapping.size() == axes.size()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      op, ": ", what, " (operand ", index, ") shape ", ShapeToString(spec.shape), " dims_mapping ",
      DimsMappingToString(spec.dims_mapping), " does not fit axes \"", axes, "\" (rank ", axes.size(), ")"));
}

}  // namespace pdist::ir::spmd
