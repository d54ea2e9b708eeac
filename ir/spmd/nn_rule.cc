// NnRule evaluation: EinsumRule plus whole results and divisibility-constrained letters.
#include "ir/spmd/nn_rule.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "ir/status.h"

namespace pdist::ir::spmd {
namespace {

bool IsWhole(const NnRule& rule, size_t output) {
  return rule.einsum.outputs[output] == "_" ||
         std::find(rule.whole_outputs.begin(), rule.whole_outputs.end(), static_cast<int>(output)) !=
             rule.whole_outputs.end();
}

// The mesh dim `letter` got in `specs` (laid out as `axes`), -1 when unsharded or absent.
int64_t MeshDimOf(char letter, const std::vector<std::string>& axes, const std::vector<TensorDistSpec>& specs) {
  for (size_t i = 0; i < axes.size() && i < specs.size(); ++i) {
    const size_t pos = axes[i].find(letter);
    if (pos != std::string::npos && pos < specs[i].dims_mapping.size() && specs[i].dims_mapping[pos] >= 0) {
      return specs[i].dims_mapping[pos];
    }
  }
  return -1;
}

// Adds to `replicated` every must_divide letter whose mesh dim in `result` does not divide its
// size; true when one was added (the rule must run again).
bool ReplicateIndivisible(NnRule& rule, const SpmdResult& result, const std::vector<int64_t>& mesh_shape) {
  bool changed = false;
  for (const auto& [letter, size] : rule.must_divide) {
    int64_t mesh_dim = MeshDimOf(letter, rule.einsum.inputs, result.inputs);
    if (mesh_dim < 0) mesh_dim = MeshDimOf(letter, rule.einsum.outputs, result.outputs);
    if (mesh_dim < 0 || size % mesh_shape[static_cast<size_t>(mesh_dim)] == 0) continue;
    rule.einsum.replicated.push_back(letter);
    changed = true;
  }
  return changed;
}

// Runs `infer` until no must_divide letter needs replicating (at most once per letter), then
// clears the Partial of whole results.
template <typename Infer>
absl::StatusOr<SpmdResult> Run(NnRule rule, const std::vector<int64_t>& mesh_shape, Infer infer) {
  PDIST_ASSIGN_OR_RETURN(SpmdResult result, infer(rule.einsum));
  for (size_t round = 0; round < rule.must_divide.size() && ReplicateIndivisible(rule, result, mesh_shape); ++round) {
    PDIST_ASSIGN_OR_RETURN(result, infer(rule.einsum));
  }
  for (size_t o = 0; o < result.outputs.size() && o < rule.einsum.outputs.size(); ++o) {
    if (IsWhole(rule, o)) result.outputs[o].partial.clear();
  }
  return result;
}

}  // namespace

SpmdRuleFns NnRuleFns(const std::string& op, NnRuleBuilder build) {
  auto rule_for = [op, build](const std::vector<Shape>& shapes, const AttributeMap& attrs) -> absl::StatusOr<NnRule> {
    absl::StatusOr<NnRule> rule = build(shapes, attrs);
    if (!rule.ok()) return WithContext(rule.status(), op);
    rule->einsum.op = op;
    return rule;
  };
  SpmdRuleFns fns;
  fns.infer = [rule_for](const std::vector<TensorDistSpec>& inputs,
                         const SpmdContext& ctx) -> absl::StatusOr<SpmdResult> {
    PDIST_ASSIGN_OR_RETURN(NnRule rule, rule_for(ShapesOf(inputs), ctx.attrs));
    return Run(std::move(rule), ctx.mesh_shape, [&](const EinsumRule& e) { return InferEinsum(e, inputs, ctx); });
  };
  fns.reverse = [rule_for](const std::vector<TensorDistSpec>& inputs, const std::vector<TensorDistSpec>& outputs,
                           const SpmdContext& ctx) -> absl::StatusOr<SpmdResult> {
    PDIST_ASSIGN_OR_RETURN(NnRule rule, rule_for(ShapesOf(inputs), ctx.attrs));
    return Run(std::move(rule), ctx.mesh_shape,
               [&](const EinsumRule& e) { return InferEinsumReverse(e, inputs, outputs, ctx); });
  };
  fns.describe = [rule_for](const std::vector<const TensorType*>& inputs, const AttributeMap& attrs) -> std::string {
    absl::StatusOr<NnRule> rule = rule_for(ShapesOf(inputs), attrs);
    if (!rule.ok()) return absl::StrCat("<error: ", rule.status().message(), ">");
    return DescribeNnRule(*rule);
  };
  return fns;
}

std::string DescribeNnRule(const NnRule& rule) {
  // DescribeEinsum names each output's Partial segment ("softmax: bh→Partial") unless all
  // outputs lack the same letters, when one unnamed segment covers them all.
  bool all_whole = true;
  std::vector<std::string> whole_prefixes;
  for (size_t o = 0; o < rule.einsum.outputs.size(); ++o) {
    if (!IsWhole(rule, o)) {
      all_whole = false;
      continue;
    }
    if (o < rule.einsum.output_names.size()) whole_prefixes.push_back(absl::StrCat(rule.einsum.output_names[o], ": "));
  }
  std::vector<std::string> segments = absl::StrSplit(DescribeEinsum(rule.einsum), "  ");
  std::vector<std::string> kept = {segments[0]};
  for (size_t s = 1; s < segments.size(); ++s) {
    const std::string& seg = segments[s];
    const bool partial = seg.find("→Partial") != std::string::npos;
    const bool named_whole = std::any_of(whole_prefixes.begin(), whole_prefixes.end(),
                                         [&](const std::string& p) { return seg.rfind(p, 0) == 0; });
    const bool unnamed = seg.find(": ") == std::string::npos;
    if (partial && (named_whole || (unnamed && all_whole))) continue;
    kept.push_back(seg);
  }
  for (const auto& [letter, size] : rule.must_divide) {
    if (rule.einsum.replicated.find(letter) != std::string::npos) continue;
    kept.push_back(absl::StrCat(std::string(1, letter), "→Replicate unless its mesh dim divides ", size));
  }
  if (!rule.note.empty()) kept.push_back(rule.note);
  return absl::StrJoin(kept, "  ");
}

bool IsAbsentShape(const Shape& shape) { return shape == Shape{0}; }

absl::StatusOr<Shape> RequireShape(const std::vector<Shape>& inputs, size_t index, const char* name, int64_t rank) {
  if (index >= inputs.size() || IsAbsentShape(inputs[index])) {
    return absl::InvalidArgumentError(absl::StrCat(name, " (input ", index, ") is required but absent"));
  }
  const Shape& shape = inputs[index];
  if (rank >= 0 && static_cast<int64_t>(shape.size()) != rank) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " (input ", index, ") must have rank ", rank, ", got shape ", ShapeToString(shape)));
  }
  return shape;
}

absl::StatusOr<int64_t> NormalizeAxis(int64_t axis, int64_t rank, const char* attr) {
  if (axis < -rank || axis >= rank) {
    return absl::InvalidArgumentError(absl::StrCat(attr, " ", axis, " out of range for rank ", rank));
  }
  return axis < 0 ? axis + rank : axis;
}

std::string UniqueLetters(const std::string& letters) {
  std::string out;
  for (char c : letters) {
    if (c != '1' && c != '_' && out.find(c) == std::string::npos) out.push_back(c);
  }
  return out;
}

}  // namespace pdist::ir::spmd
