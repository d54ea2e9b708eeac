// EinsumRule: an SPMD rule written as axis letters, evaluated forward and reverse and printed.
//
// One builder per op family turns (input shapes, attrs) into an EinsumRule; EinsumRuleFns wraps
// it into the three OpDef slots, so the forward rule, the reverse rule and the printed form can
// never disagree.
//
//   matmul x[64,32] · y[32,48]:  EinsumRule{inputs {"mk","kn"}, outputs {"mn"},
//                                           linear {0,1} kOne}
//   forward, mesh [2,2]: x [1,0], y [-1,-1] → x [1,0], y [0,-1]; out [1,-1] partial {0: sum}
//   Describe → "mk,kn->mn  k→Partial  pass P: x|y"
//
// Semantics (docs/spmd.md):
//  - Forward merges the input mappings letter by letter (MergeAxisShardings, in `merge_order`);
//    each input gets the mapping of its letters; each output too, and is Partial(`contracted`) on
//    every mesh dim that shards a letter it lacks. Letters in `replicated` are never sharded;
//    '1' marks a size-1 axis; "_" marks an absent optional input (returned unchanged).
//  - Partial inputs: a mesh dim on which inputs are Partial stays Partial in the outputs only
//    through the inputs in `partial.linear`, with a reduce type in `partial.passes`, when no
//    letter is sharded on that mesh dim; kAlike needs every linear input Partial alike (add:
//    P+P), kOne takes the first linear input Partial there (matmul: P·R). Every other Partial
//    input is returned with its partial cleared: the caller must reshard it first.
//  - Reverse merges only the output mappings; inputs take the mapping of their letters (a letter
//    no output has is -1). Reverse never infers Partial (Paddle's "Partial stage I").
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/spmd/einsum.h"
#include "ir/spmd/spmd_rule.h"

namespace pdist::ir::spmd {

// Which Partial inputs an op carries through to its outputs (linear arguments).
struct PartialPolicy {
  enum class Mode : int8_t {
    kOne,    // Partial on one linear input passes (matmul, multiply): x|y
    kAlike,  // every linear input Partial with one reduce type passes (add, concat): x&y
  };
  std::vector<int> linear;  // input indices; empty: every Partial input is cleared
  Mode mode = Mode::kOne;
  std::vector<ReduceType> passes = {ReduceType::kSum, ReduceType::kAvg};

  static PartialPolicy None() { return {}; }
  // Linear in `inputs`, passing sum and avg partials.
  static PartialPolicy Linear(std::vector<int> inputs, Mode mode = Mode::kOne) { return {std::move(inputs), mode}; }
  // Pure data movement (transpose, reshape, split, slice): every reduce type passes.
  static PartialPolicy Movement(std::vector<int> inputs, Mode mode = Mode::kOne) {
    return {std::move(inputs), mode, {ReduceType::kSum, ReduceType::kAvg, ReduceType::kMax}};
  }
};

struct EinsumRule {
  std::string op;                         // names the op in errors
  std::vector<std::string> inputs;        // axes per input; "_" = absent optional input
  std::vector<std::string> outputs;       // axes per output
  std::vector<std::string> input_names;   // for the printed form ("x", "y", "out_grad")
  std::vector<std::string> output_names;  // printed when outputs lack different letters
  std::string replicated;                 // letters that must stay unsharded
  ReduceType contracted = ReduceType::kSum;
  PartialPolicy partial;
  std::vector<int> merge_order;      // inputs to merge, in order; empty: 0..n-1
  bool align = false;                // merge by AlignAxisShardings (concat), not first-wins
  std::vector<Shape> output_shapes;  // empty: derived from the letters' sizes
};

// Forward: the inputs' required specs and the outputs' specs. Errors (InvalidArgument) name the
// op, the operand and the offending dims_mapping.
absl::StatusOr<SpmdResult> InferEinsum(const EinsumRule& rule, const std::vector<TensorDistSpec>& inputs,
                                       const SpmdContext& ctx);

// Reverse: from the outputs' mappings only (input shapes are read from `inputs`).
absl::StatusOr<SpmdResult> InferEinsumReverse(const EinsumRule& rule, const std::vector<TensorDistSpec>& inputs,
                                              const std::vector<TensorDistSpec>& outputs, const SpmdContext& ctx);

// "mk,kn->mn  k→Partial  pass P: x|y". Segments after the einsum, each after two spaces:
//   "<letters>→Partial[(avg|max)]"   sharded letters an output lacks (per output name when the
//                                    outputs differ: "x_grad: n→Partial  y_grad: bm→Partial")
//   "<letters>→Replicate"            letters that must stay unsharded
//   "pass P[(types)]: x|y" / "x&y"   the Partial policy (types shown unless sum,avg)
std::string DescribeEinsum(const EinsumRule& rule);

// The three OpDef slots from one builder of the rule for given input shapes (an absent optional
// input has shape [0]).
using EinsumBuilder =
    std::function<absl::StatusOr<EinsumRule>(const std::vector<Shape>& input_shapes, const AttributeMap& attrs)>;

struct SpmdRuleFns {
  InferSpmdFn infer;
  InferSpmdReverseFn reverse;
  DescribeSpmdFn describe;
};
SpmdRuleFns EinsumRuleFns(EinsumBuilder build);

// Helpers for builders and other rules.
// Letters for a tensor of `rank` axes: "abc…" (no reserved letters).
std::string Letters(int64_t rank);
// '1' at every axis of `shape` whose size is 1.
std::string MarkSizeOne(std::string axes, const Shape& shape);
// Shapes of the specs; DescribeSpmdFn's types (nullptr → [0]).
std::vector<Shape> ShapesOf(const std::vector<TensorDistSpec>& specs);
std::vector<Shape> ShapesOf(const std::vector<const TensorType*>& types);
// The spec with partial dims removed / set.
TensorDistSpec WithoutPartial(TensorDistSpec spec);
// Attributes with a fallback when absent (rules may receive un-normalised attribute maps).
absl::StatusOr<bool> BoolAttr(const AttributeMap& attrs, const std::string& name, bool fallback);
absl::StatusOr<int64_t> IntAttr(const AttributeMap& attrs, const std::string& name, int64_t fallback);
absl::StatusOr<double> DoubleAttr(const AttributeMap& attrs, const std::string& name, double fallback);
absl::StatusOr<std::vector<int64_t>> IntListAttr(const AttributeMap& attrs, const std::string& name,
                                                 std::vector<int64_t> fallback = {});
// Checks that a builder got `count` input shapes; the error names the op.
absl::Status CheckInputCount(const std::string& op, const std::vector<Shape>& in, size_t count);
// Checks that spec `index` has one mapping entry per axis letter; the error names the op, the
// operand and the mapping.
absl::Status CheckRank(const std::string& op, const char* what, size_t index, const TensorDistSpec& spec,
                       const std::string& axes);

}  // namespace pdist::ir::spmd
