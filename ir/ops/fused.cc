// Fused ops: what a pass makes of several ops on a rank's program so that a GPU runs them as one
// kernel. fused_gemm_epilogue (Paddle's op of that name) is a matmul whose bias add runs in the
// GEMM's epilogue (cuBLASLt's CUBLASLT_EPILOGUE_BIAS), so the product is written once instead of
// written, read back and written again by an add:
//
//   %3 = matmul(%x, %w) : f32[8,32,96]                →   %4 = fused_gemm_epilogue(%x, %w, %b) : f32[8,32,96]
//   %4 = add(%3, %b) : f32[8,32,96]   // %b : f32[96]
//
// out = matmul(x, y) + bias, bias of shape [n] added to every row; y is one matrix and x is not
// transposed (x's leading dims fold into the GEMM's rows: one GEMM). Its gradient is matmul's
// and the bias's column sums. The passes/fuse_gemm_epilogue.h pass makes it on a rank's program;
// like the collectives it has no SPMD rule of its own.
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ir/builder.h"
#include "ir/op_def.h"
#include "ir/ops/op_families.h"
#include "ir/ops/op_helpers.h"
#include "ir/status.h"

namespace pdist::ir {
namespace {

// (x, y, bias) → out: matmul's result (`matmul_meta`), checked to fold into one GEMM with a bias of [n].
absl::StatusOr<std::vector<TensorType>> FusedGemmEpilogueMeta(const InferMetaFn& matmul_meta, const InputTypes& in,
                                                              const AttributeMap& attrs) {
  PDIST_ASSIGN_OR_RETURN(std::vector<TensorType> out, matmul_meta({in[0], in[1]}, attrs));
  PDIST_ASSIGN_OR_RETURN(bool trans_x, GetBool(attrs, "trans_x"));
  if (in[0]->rank() < 2 || in[1]->rank() != 2 || trans_x) {
    return absl::InvalidArgumentError(absl::StrCat("fused_gemm_epilogue multiplies an untransposed x of rank >= 2 by "
                                                   "one matrix y (one GEMM); got x ",
                                                   in[0]->ToString(), trans_x ? " transposed" : "", " and y ",
                                                   in[1]->ToString(), " (use matmul and add)"));
  }
  const TensorType bias{{out[0].shape.back()}, out[0].dtype};
  if (*in[2] != bias) {
    return absl::InvalidArgumentError(
        absl::StrCat("fused_gemm_epilogue's bias must be ", bias.ToString(), " (one per output column), got ",
                     in[2]->ToString()));
  }
  return out;
}

// matmul's gradient for x and y; the bias's, the output gradient summed over every dim but the last.
absl::StatusOr<std::vector<Value*>> FusedGemmEpilogueGrad(Builder& b, const Operation& op,
                                                          const std::vector<Value*>& out_grads) {
  Value* g = out_grads[0];
  if (g == nullptr) return std::vector<Value*>(op.num_operands(), nullptr);
  PDIST_ASSIGN_OR_RETURN(std::vector<Value*> grads,
                         ops::EmitGradOp(b, op, "matmul_grad", {op.operand(0), op.operand(1), g}, {0, 1}));
  std::vector<int64_t> rows(static_cast<size_t>(g->type().rank() - 1));
  std::iota(rows.begin(), rows.end(), int64_t{0});
  PDIST_ASSIGN_OR_RETURN(grads[2], b.Op1("sum", {g}, {{"axis", rows}, {"keep_dim", false}}));
  return grads;
}

}  // namespace

absl::Status RegisterFusedOps(OpRegistry& registry) {
  const OpDef* matmul = registry.Find("matmul");
  if (matmul == nullptr) return absl::FailedPreconditionError("fused_gemm_epilogue needs matmul registered first");
  OpDef def{
      .name = "fused_gemm_epilogue",
      .inputs = {{"x"}, {"y"}, {"bias"}},
      .outputs = {{"out"}},
      .attrs = matmul->attrs,
      .infer_meta = [matmul_meta = matmul->infer_meta](const InputTypes& in, const AttributeMap& attrs) {
        return FusedGemmEpilogueMeta(matmul_meta, in, attrs);
      },
      // matmul's FLOPs and bytes, the bias read and one add per element.
      .cost = [matmul_cost = matmul->cost](const InputTypes& in, const std::vector<TensorType>& out,
                                           const AttributeMap& attrs) {
        OpCost cost = matmul_cost({in[0], in[1]}, out, attrs);
        cost.flops += static_cast<double>(out[0].num_elements());
        cost.bytes += static_cast<double>(in[2]->num_bytes());
        return cost;
      },
      .compute_bound = true,
  };
  ops::MarkLocalOnly(def, "a matmul and its bias add, formed on a rank's program (passes/fuse_gemm_epilogue.h)");
  def.grad_kind = GradKind::kDifferentiable;  // a program that holds one still differentiates
  def.grad = FusedGemmEpilogueGrad;
  return registry.Register(std::move(def));
}

}  // namespace pdist::ir
