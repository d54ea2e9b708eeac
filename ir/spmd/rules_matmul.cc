// SPMD rules of matmul and matmul_grad (Paddle's MatmulInferSpmd / MatmulGradInferSpmd).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "ir/spmd/rules.h"
#include "ir/status.h"

namespace pdist::ir::spmd {
namespace {

struct MatmulAxes {
  std::string x, y, out;
};

// Letters of x, y and out: batch letters right-aligned (k, m, n reserved), size-1 dims '1'.
absl::StatusOr<MatmulAxes> AxesOf(const char* op, const std::vector<Shape>& in, size_t count,
                                  const AttributeMap& attrs) {
  PDIST_RETURN_IF_ERROR(CheckInputCount(op, in, count));
  const int64_t xr = static_cast<int64_t>(in[0].size());
  const int64_t yr = static_cast<int64_t>(in[1].size());
  if (xr == 0 || yr == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": x ", ShapeToString(in[0]), " and y ", ShapeToString(in[1]), " must have rank >= 1"));
  }
  PDIST_ASSIGN_OR_RETURN(bool trans_x, BoolAttr(attrs, "trans_x", false));
  PDIST_ASSIGN_OR_RETURN(bool trans_y, BoolAttr(attrs, "trans_y", false));
  const int64_t xb = std::max<int64_t>(xr - 2, 0);
  const int64_t yb = std::max<int64_t>(yr - 2, 0);
  const int64_t ob = std::max(xb, yb);
  MatmulAxes a;
  a.x = BroadcastAxes(xb, ob) + (xr == 1 ? "k" : trans_x ? "km" : "mk");
  a.y = BroadcastAxes(yb, ob) + (yr == 1 ? "k" : trans_y ? "nk" : "kn");
  a.out = BroadcastAxes(ob, ob) + (xr > 1 ? "m" : "") + (yr > 1 ? "n" : "");
  a.x = MarkSizeOne(a.x, in[0]);
  a.y = MarkSizeOne(a.y, in[1]);
  return a;
}

absl::StatusOr<EinsumRule> BuildMatmul(const std::vector<Shape>& in, const AttributeMap& attrs) {
  PDIST_ASSIGN_OR_RETURN(MatmulAxes a, AxesOf("matmul", in, 2, attrs));
  EinsumRule rule;
  rule.op = "matmul";
  rule.inputs = {a.x, a.y};
  rule.outputs = {a.out};
  rule.input_names = {"x", "y"};
  rule.output_names = {"out"};
  rule.partial = PartialPolicy::Linear({0, 1});
  return rule;
}

absl::StatusOr<EinsumRule> BuildMatmulGrad(const std::vector<Shape>& in, const AttributeMap& attrs) {
  PDIST_ASSIGN_OR_RETURN(MatmulAxes a, AxesOf("matmul_grad", in, 3, attrs));
  EinsumRule rule;
  rule.op = "matmul_grad";
  rule.inputs = {a.x, a.y, MarkSizeOne(a.out, in[2])};
  rule.outputs = {a.x, a.y};
  rule.input_names = {"x", "y", "out_grad"};
  rule.output_names = {"x_grad", "y_grad"};
  rule.partial = PartialPolicy::Linear({2});
  return rule;
}

}  // namespace

SpmdRuleFns MatmulRule() { return EinsumRuleFns(BuildMatmul); }
SpmdRuleFns MatmulGradRule() { return EinsumRuleFns(BuildMatmulGrad); }

}  // namespace pdist::ir::spmd
