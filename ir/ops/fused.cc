// Fused ops: what a pass makes of several ops on a rank's program so that a GPU runs them as one
// kernel. fused_gemm_epilogue (Paddle's op of that name) is a matmul whose bias add — and, with
// activation = "gelu", the GELU after it — runs in the GEMM's epilogue (cuBLASLt's
// CUBLASLT_EPILOGUE_BIAS, CUBLASLT_EPILOGUE_GELU_AUX_BIAS), so the product is written once instead
// of written, read back and written again by each op after it:
//
//   %3 = matmul(%x, %w) : f32[8,32,96]                →   %4 = fused_gemm_epilogue(%x, %w, %b) : f32[8,32,96]
//   %4 = add(%3, %b) : f32[8,32,96]   // %b : f32[96]
//
//   %5 = gelu(%4) {approximate = true}                →   %5, %4 = fused_gemm_epilogue(%x, %w, %b) {activation = "gelu"}
//
// out = matmul(x, y) + bias, bias of shape [n] added to every row; y is one matrix and x is not
// transposed (x's leading dims fold into the GEMM's rows: one GEMM). With activation "gelu" the
// results are gelu(out) in its tanh form (gelu's `approximate = true`, the form cuBLASLt's epilogue
// computes) and out itself, the GELU's input that its gradient reads (Paddle's ReserveSpace). Its
// gradient is gelu's, then matmul's and the bias's column sums. fused_gemm_epilogue_grad(x, y,
// out_grad) → x_grad, y_grad, bias_grad is matmul_grad and the bias's add_grad in one (cuBLASLt's
// bias-gradient epilogue on the weight gradient's GEMM, which reads out_grad anyway). The
// passes/fuse_gemm_epilogue.h pass makes both on a rank's program; like the collectives they have
// no SPMD rule of their own.
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ir/builder.h"
#include "ir/op_def.h"
#include "ir/ops/matmul.h"
#include "ir/ops/op_families.h"
#include "ir/ops/op_helpers.h"
#include "ir/status.h"

namespace pdist::ir {
namespace {

// x·y folds into one GEMM: an untransposed x of rank >= 2 (its leading dims the GEMM's rows) and
// one matrix y.
absl::Status ExpectOneGemm(const std::string& op, const TensorType& x, const TensorType& y, const AttributeMap& attrs) {
  PDIST_ASSIGN_OR_RETURN(bool trans_x, GetBool(attrs, "trans_x"));
  if (ops::FoldsIntoOneGemm(x.shape, y.shape, trans_x)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(op, " multiplies an untransposed x of rank >= 2 by one matrix y (one ",
                                                 "GEMM); got x ", x.ToString(), trans_x ? " transposed" : "", " and y ",
                                                 y.ToString(), " (use matmul and add)"));
}

// (x, y, bias) → out: matmul's result (`matmul_meta`), checked to fold into one GEMM with a bias of [n].
absl::StatusOr<std::vector<TensorType>> FusedGemmEpilogueMeta(const InferMetaFn& matmul_meta, const InputTypes& in,
                                                              const AttributeMap& attrs) {
  PDIST_ASSIGN_OR_RETURN(std::vector<TensorType> out, matmul_meta({in[0], in[1]}, attrs));
  PDIST_RETURN_IF_ERROR(ExpectOneGemm("fused_gemm_epilogue", *in[0], *in[1], attrs));
  const TensorType bias{{out[0].shape.back()}, out[0].dtype};
  if (*in[2] != bias) {
    return absl::InvalidArgumentError(
        absl::StrCat("fused_gemm_epilogue's bias must be ", bias.ToString(), " (one per output column), got ",
                     in[2]->ToString()));
  }
  PDIST_ASSIGN_OR_RETURN(std::string activation, GetString(attrs, "activation"));
  if (activation == "gelu") out.push_back(out[0]);  // gelu(sum), and the sum its gradient reads
  if (activation != "none" && activation != "gelu") {
    return absl::InvalidArgumentError(absl::StrCat("fused_gemm_epilogue's activation must be none or gelu, got '",
                                                   activation, "'"));
  }
  return out;
}

// The sum's gradient (through the GELU's, plus any gradient of the kept sum, with "gelu"); from
// it matmul's gradient for x and y and the bias's, summed over every dim but the last.
absl::StatusOr<std::vector<Value*>> FusedGemmEpilogueGrad(Builder& b, const Operation& op,
                                                          const std::vector<Value*>& out_grads) {
  Value* g = out_grads[0];
  if (op.num_results() == 2 && g != nullptr) {
    PDIST_ASSIGN_OR_RETURN(g, b.Op1("gelu_grad", {op.result(1), g}, {{"approximate", true}}));
  }
  if (op.num_results() == 2 && out_grads[1] != nullptr) {
    if (g == nullptr) {
      g = out_grads[1];
    } else {
      PDIST_ASSIGN_OR_RETURN(g, b.Op1("add", {g, out_grads[1]}));
    }
  }
  if (g == nullptr) return std::vector<Value*>(op.num_operands(), nullptr);
  AttributeMap matmul_attrs = op.attrs();
  matmul_attrs.erase("activation");
  PDIST_ASSIGN_OR_RETURN(std::vector<Value*> grads, ops::EmitGradOp(b, op, "matmul_grad", {op.operand(0), op.operand(1), g},
                                                                    {0, 1}, matmul_attrs));
  std::vector<int64_t> rows(static_cast<size_t>(g->type().rank() - 1));
  std::iota(rows.begin(), rows.end(), int64_t{0});
  PDIST_ASSIGN_OR_RETURN(grads[2], b.Op1("sum", {g}, {{"axis", rows}, {"keep_dim", false}}));
  return grads;
}

// (x, y, out_grad) → x_grad, y_grad, bias_grad: matmul_grad's (`matmul_grad_meta`) and the bias's,
// one per output column.
absl::StatusOr<std::vector<TensorType>> FusedGemmEpilogueGradMeta(const InferMetaFn& matmul_grad_meta,
                                                                  const InputTypes& in, const AttributeMap& attrs) {
  PDIST_ASSIGN_OR_RETURN(std::vector<TensorType> out, matmul_grad_meta(in, attrs));
  PDIST_RETURN_IF_ERROR(ExpectOneGemm("fused_gemm_epilogue_grad", *in[0], *in[1], attrs));
  out.push_back(TensorType{{in[2]->shape.back()}, in[2]->dtype});
  return out;
}

}  // namespace

absl::Status RegisterFusedOps(OpRegistry& registry) {
  const OpDef* matmul = registry.Find("matmul");
  if (matmul == nullptr || registry.Find("gelu") == nullptr) {
    return absl::FailedPreconditionError("fused_gemm_epilogue needs matmul and gelu registered first");
  }
  std::vector<AttrSpec> attrs = matmul->attrs;
  attrs.push_back({"activation", std::string("none")});
  OpDef def{
      .name = "fused_gemm_epilogue",
      .inputs = {{"x"}, {"y"}, {"bias"}},
      .outputs = {{"out"}, {.name = "reserve_space", .variadic = true}},  // with "gelu" only
      .attrs = attrs,
      .infer_meta = [matmul_meta = matmul->infer_meta](const InputTypes& in, const AttributeMap& attrs) {
        return FusedGemmEpilogueMeta(matmul_meta, in, attrs);
      },
      // matmul's FLOPs and bytes, the bias read and one add per element; with "gelu" its FLOPs
      // (gelu's cost, ir/ops/activation.cc) and the kept sum written.
      .cost = [matmul_cost = matmul->cost, gelu_cost = registry.Find("gelu")->cost](
                  const InputTypes& in, const std::vector<TensorType>& out, const AttributeMap& attrs) {
        OpCost cost = matmul_cost({in[0], in[1]}, {out[0]}, attrs);
        cost.flops += static_cast<double>(out[0].num_elements());
        cost.bytes += static_cast<double>(in[2]->num_bytes());
        if (out.size() == 2) {
          cost.flops += gelu_cost({&out[1]}, {out[0]}, {{"approximate", true}}).flops;
          cost.bytes += static_cast<double>(out[1].num_bytes());
        }
        return cost;
      },
      .compute_bound = true,
  };
  ops::MarkLocalOnly(def, "a matmul and its bias add, formed on a rank's program (passes/fuse_gemm_epilogue.h)");
  def.grad_kind = GradKind::kDifferentiable;  // a program that holds one still differentiates
  def.grad = FusedGemmEpilogueGrad;
  PDIST_RETURN_IF_ERROR(registry.Register(std::move(def)));

  // matmul_grad and the bias's gradient (add_grad's column sums of out_grad) in one GEMM's
  // epilogue: the weight gradient's GEMM reduces out_grad over the rows it already reads
  // (cuBLASLt's bias-gradient epilogue), so out_grad is not read again for the bias.
  const OpDef* matmul_grad = registry.Find("matmul_grad");
  if (matmul_grad == nullptr) return absl::FailedPreconditionError("fused_gemm_epilogue_grad needs matmul_grad");
  OpDef grad_def{
      .name = "fused_gemm_epilogue_grad",
      .inputs = {{"x"}, {"y"}, {"out_grad"}},
      .outputs = {{"x_grad"}, {"y_grad"}, {"bias_grad"}},
      .attrs = matmul->attrs,
      .infer_meta = [matmul_grad_meta = matmul_grad->infer_meta](const InputTypes& in, const AttributeMap& attrs) {
        return FusedGemmEpilogueGradMeta(matmul_grad_meta, in, attrs);
      },
      .grad_kind = GradKind::kGradientOp,
      .grad = nullptr,
      // matmul_grad's, and a sum per out_grad element with the bias gradient written.
      .cost = [matmul_grad_cost = matmul_grad->cost](const InputTypes& in, const std::vector<TensorType>& out,
                                                     const AttributeMap& attrs) {
        OpCost cost = matmul_grad_cost(in, {out[0], out[1]}, attrs);
        cost.flops += static_cast<double>(in[2]->num_elements());
        cost.bytes += static_cast<double>(out[2].num_bytes());
        return cost;
      },
      .compute_bound = true,
  };
  ops::MarkLocalOnly(grad_def, "matmul_grad and a bias's add_grad, formed on a rank's program (passes/fuse_gemm_epilogue.h)");
  return registry.Register(std::move(grad_def));
}

}  // namespace pdist::ir
