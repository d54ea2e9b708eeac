// The SPMD rules of the op families matmul, elementwise, activation, reduction, shape and
// slicing, as the three OpDef slots (forward, reverse, describe). docs/spmd.md describes them.
//
//   const spmd::SpmdRuleFns rule = spmd::MatmulRule();
//   OpDef{..., .infer_spmd = rule.infer, .infer_spmd_reverse = rule.reverse,
//         .describe_spmd = rule.describe}
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/op_def.h"
#include "ir/spmd/einsum_rule.h"

namespace pdist::ir::spmd {

// Factories that serve several ops take the op's name, which errors name.
//
// The output shapes of an op for given input shapes (rules whose output sizes do not follow
// from the axis letters: split, concat, slice, reshape).
using OutputShapesFn =
    std::function<absl::StatusOr<std::vector<Shape>>(const std::vector<Shape>& inputs, const AttributeMap& attrs)>;
// Adapts an op's InferMeta (called with f32 inputs of the given shapes).
OutputShapesFn ShapesFromMeta(InferMetaFn meta);

// --- rules_matmul.cc ---------------------------------------------------------------------------
// matmul(x, y): "<b>mk,<b>kn-><b>mn  k→Partial  pass P: x|y" (trans flags swap letters; 1-D
// operands drop m or n; size-1 batch dims are '1').
SpmdRuleFns MatmulRule();
// matmul_grad(x, y, out_grad) → x_grad, y_grad: one merge of x, y, out_grad (in that order);
// each grad is Partial on the mesh dims of the letters it lacks (n for x_grad; m and broadcast
// batch letters for y_grad).
SpmdRuleFns MatmulGradRule();

// --- rules_elementwise.cc ----------------------------------------------------------------------
// How a binary elementwise op carries Partial inputs.
enum class BinaryLinearity : int8_t {
  kAdditive,        // add, subtract: x&y alike (sum or avg)
  kMultiplicative,  // multiply: x|y
  kNumerator,       // divide: x
  kMaximum,         // maximum: x&y both Partial(max)
  kNone,            // comparisons: every Partial input is cleared
};
// Right-aligned broadcasting; a size-1 input dim is '1'.
SpmdRuleFns BinaryRule(std::string op, BinaryLinearity linearity);
// <op>_grad(x, y, out_grad) → x_grad, y_grad: merged from out_grad first; the grad of a
// broadcast input is Partial on the mesh dims sharding its broadcast axes.
SpmdRuleFns BinaryGradRule(std::string op);

// expand(x) {shape}: x's axes right-aligned to out; its size-1 axes and out's new leading axes
// are out's own (replicated); every Partial passes (a copy).
SpmdRuleFns ExpandRule();
// where(condition, x, y): the three right-aligned and broadcast; Partial x and y pass alike
// (where(c, x1 + x2, y1 + y2) = where(c, x1, y1) + where(c, x2, y2)); a condition is never Partial.
SpmdRuleFns WhereRule();

enum class UnaryKind : int8_t {
  kNonLinear,  // relu gelu silu tanh exp: Partial input cleared
  kScale,      // scale: Partial(avg) passes; sum when bias = 0; max when scale > 0
  kCast,       // cast: Partial passes when the target dtype is floating point
};
SpmdRuleFns UnaryRule(std::string op, UnaryKind kind);
// <op>_grad(saved, out_grad) → x_grad, merged from out_grad first; linear in out_grad.
SpmdRuleFns UnaryGradRule(std::string op, std::string saved_name);
// dropout(x, seed_tensor?) → out, mask: identity on x; Partial cleared (the mask is per rank).
SpmdRuleFns DropoutRule();

// --- rules_reduction.cc ------------------------------------------------------------------------
enum class ReductionKind : int8_t { kSum, kMean, kMax, kMin };
// A reduced sharded axis makes out Partial: sum → sum, mean → avg, max → max; min has no
// Partial type, so its reduced axes must be replicated.
SpmdRuleFns ReductionRule(std::string op, ReductionKind kind);
// sum_grad / mean_grad (x, out_grad), max_grad / min_grad (x, out, out_grad) → x_grad: the
// reduced axes are replicated; linear in out_grad.
SpmdRuleFns ReductionGradRule(std::string op, ReductionKind kind);
// full() → out: replicated forward; the reverse keeps out's sharding (a constant is free to shard).
SpmdRuleFns FullRule();

// --- rules_shape.cc ----------------------------------------------------------------------------
// reshape, squeeze, unsqueeze: through MakeReshapeDimTrans / InferFromDimTrans.
SpmdRuleFns ReshapeLikeRule(std::string op, OutputShapesFn out_shapes);
// transpose: out[i] = x[perm[i]].
SpmdRuleFns TransposeRule();

// gather(x, index) {axis}: x's axis replicated; x's other axes and index's axes pass to out.
SpmdRuleFns GatherRule();
// gather_grad(index, out_grad) {axis, x_shape} → x_grad: the gathered axis replicated; x_grad is
// Partial(sum) on the mesh dims that shard index's axes (each rank adds its indices' rows).
SpmdRuleFns GatherGradRule();

// --- rules_slicing.cc --------------------------------------------------------------------------
// split / split_with_num: the split axis replicated; reverse merges every output.
SpmdRuleFns SplitRule(std::string op, OutputShapesFn out_shapes);
// concat: AlignAxisShardings over the non-concat axes; the concat axis replicated.
SpmdRuleFns ConcatRule(OutputShapesFn out_shapes);
// slice: sliced axes replicated; decrease_axis drops them from out.
SpmdRuleFns SliceRule(OutputShapesFn out_shapes);
// slice_grad(input, out_grad) → input_grad: sliced axes replicated; linear in out_grad.
SpmdRuleFns SliceGradRule();

}  // namespace pdist::ir::spmd
