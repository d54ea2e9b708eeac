// SPMD rules of the view ops: reshape, squeeze, unsqueeze (through DimTrans) and transpose.
#include "absl/strings/str_cat.h"
#include "ir/ops/op_helpers.h"
#include "ir/spmd/dim_trans.h"
#include "ir/spmd/rules.h"
#include "ir/status.h"

namespace pdist::ir::spmd {

OutputShapesFn ShapesFromMeta(InferMetaFn meta) {
  return [meta](const std::vector<Shape>& inputs, const AttributeMap& attrs) -> absl::StatusOr<std::vector<Shape>> {
    std::vector<TensorType> types;
    for (const Shape& s : inputs) types.push_back({s, DataType::kFloat32});
    InputTypes ptrs;
    for (const TensorType& t : types) ptrs.push_back(&t);
    PDIST_ASSIGN_OR_RETURN(std::vector<TensorType> out, meta(ptrs, attrs));
    std::vector<Shape> shapes;
    for (const TensorType& t : out) shapes.push_back(t.shape);
    return shapes;
  };
}

namespace {

// x's spec and out's shape, checked.
absl::StatusOr<Shape> ReshapeTarget(const std::string& op, const OutputShapesFn& out_shapes, const Shape& x,
                                    const AttributeMap& attrs) {
  absl::StatusOr<std::vector<Shape>> out = out_shapes({x}, attrs);
  if (!out.ok()) return WithContext(out.status(), op);
  if (out->size() != 1) return absl::InternalError(absl::StrCat(op, ": expected one result shape"));
  return (*out)[0];
}

// Shardings through the DimTrans from `src` (the spec whose mapping is known) to `tgt_shape`;
// returns {src spec, tgt spec} with `partial` on both.
absl::StatusOr<std::pair<TensorDistSpec, TensorDistSpec>> Through(const std::string& op, const TensorDistSpec& src,
                                                                  const Shape& tgt_shape,
                                                                  const std::vector<int64_t>& mesh_shape,
                                                                  const PartialDims& partial) {
  absl::StatusOr<std::vector<DimTrans>> dims = MakeReshapeDimTrans(src.shape, tgt_shape);
  if (!dims.ok()) return WithContext(dims.status(), op);
  const DimTransMappings m = InferFromDimTrans(src.shape, src.dims_mapping, *dims, mesh_shape);
  return std::make_pair(TensorDistSpec{src.shape, m.input, partial}, TensorDistSpec{tgt_shape, m.output, partial});
}

absl::Status CheckOne(const std::string& op, const std::vector<TensorDistSpec>& specs, const SpmdContext& ctx,
                      const char* what) {
  if (specs.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": expected 1 ", what, ", got ", specs.size()));
  }
  return WithContext(ValidateSpecs(specs, ctx.mesh_shape, what), op);  // also checks the mapping's length
}

}  // namespace

SpmdRuleFns ReshapeLikeRule(std::string op, OutputShapesFn out_shapes) {
  SpmdRuleFns fns;
  // Forward: x's shardings through MakeReshapeDimTrans(x, out); x's Partial passes (any type).
  fns.infer = [op, out_shapes](const std::vector<TensorDistSpec>& inputs,
                               const SpmdContext& ctx) -> absl::StatusOr<SpmdResult> {
    PDIST_RETURN_IF_ERROR(CheckOne(op, inputs, ctx, "inputs"));
    PDIST_ASSIGN_OR_RETURN(Shape out, ReshapeTarget(op, out_shapes, inputs[0].shape, ctx.attrs));
    PDIST_ASSIGN_OR_RETURN(auto specs, Through(op, inputs[0], out, ctx.mesh_shape, inputs[0].partial));
    return SpmdResult{{specs.first}, {specs.second}};
  };
  // Reverse: out's shardings through MakeReshapeDimTrans(out, x); no Partial.
  fns.reverse = [op](const std::vector<TensorDistSpec>& inputs, const std::vector<TensorDistSpec>& outputs,
                     const SpmdContext& ctx) -> absl::StatusOr<SpmdResult> {
    PDIST_RETURN_IF_ERROR(CheckOne(op, inputs, ctx, "inputs"));
    PDIST_RETURN_IF_ERROR(CheckOne(op, outputs, ctx, "outputs"));
    PDIST_ASSIGN_OR_RETURN(auto specs, Through(op, outputs[0], inputs[0].shape, ctx.mesh_shape, {}));
    return SpmdResult{{specs.second}, {specs.first}};
  };
  // "abc->a,b,split(c,[4,16],0),split(c,[4,16],1)  pass P(any): x"
  fns.describe = [op, out_shapes](const std::vector<const TensorType*>& inputs,
                                  const AttributeMap& attrs) -> std::string {
    if (inputs.size() != 1 || inputs[0] == nullptr) return absl::StrCat("<error: ", op, " takes one input>");
    absl::StatusOr<Shape> out = ReshapeTarget(op, out_shapes, inputs[0]->shape, attrs);
    absl::StatusOr<std::vector<DimTrans>> dims =
        out.ok() ? MakeReshapeDimTrans(inputs[0]->shape, *out) : absl::StatusOr<std::vector<DimTrans>>(out.status());
    if (!dims.ok()) return absl::StrCat("<error: ", dims.status().message(), ">");
    return absl::StrCat(Letters(inputs[0]->rank()), "->", DimTransListToString(*dims), "  pass P(any): x");
  };
  return fns;
}

SpmdRuleFns TransposeRule() {
  return EinsumRuleFns([](const std::vector<Shape>& in, const AttributeMap& attrs) -> absl::StatusOr<EinsumRule> {
    PDIST_RETURN_IF_ERROR(CheckInputCount("transpose", in, 1));
    PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> perm, IntListAttr(attrs, "perm"));
    const int64_t rank = static_cast<int64_t>(in[0].size());
    const std::string x = Letters(rank);
    std::string out;
    for (int64_t p : perm) {
      absl::StatusOr<int64_t> axis = ops::NormalizeAxis(p, rank);
      if (!axis.ok() || out.find(x[*axis]) != std::string::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat("transpose: perm ", ShapeToString(perm), " is not a permutation of rank ", rank));
      }
      out.push_back(x[*axis]);
    }
    if (static_cast<int64_t>(out.size()) != rank) {
      return absl::InvalidArgumentError(
          absl::StrCat("transpose: perm ", ShapeToString(perm), " has ", perm.size(), " entries, x has rank ", rank));
    }
    EinsumRule rule;
    rule.op = "transpose";
    rule.inputs = {x};
    rule.outputs = {out};
    rule.input_names = {"x"};
    rule.output_names = {"out"};
    rule.partial = PartialPolicy::Movement({0});
    return rule;
  });
}

}  // namespace pdist::ir::spmd
