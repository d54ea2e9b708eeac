// Shared helpers for op definitions.
#include "ir/ops/op_helpers.h"

#include "absl/strings/str_cat.h"
#include "ir/status.h"

namespace pdist::ir::ops {

absl::StatusOr<Shape> BroadcastShapes(const Shape& a, const Shape& b) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("shapes ", ShapeToString(a), " and ", ShapeToString(b), " do not broadcast (dim ", i, ": ", da,
                       " vs ", db, ")"));
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

absl::StatusOr<int64_t> NormalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1)) {
    return absl::InvalidArgumentError(absl::StrCat("axis ", axis, " out of range for rank ", rank));
  }
  return axis < 0 ? axis + rank : axis;
}

absl::Status ExpectFloat(const InputTypes& in, size_t index, const std::string& what) {
  if (index >= in.size() || in[index] == nullptr) return absl::InvalidArgumentError(absl::StrCat(what, " is missing"));
  if (!IsFloatingPoint(in[index]->dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " must be floating point, got ", in[index]->ToString()));
  }
  return absl::OkStatus();
}

absl::Status ExpectRank(const InputTypes& in, size_t index, int64_t rank, const std::string& what) {
  if (index >= in.size() || in[index] == nullptr) return absl::InvalidArgumentError(absl::StrCat(what, " is missing"));
  if (in[index]->rank() != rank) {
    return absl::InvalidArgumentError(absl::StrCat(what, " must have rank ", rank, ", got ", in[index]->ToString()));
  }
  return absl::OkStatus();
}

absl::Status ExpectSameType(const InputTypes& in, size_t a, size_t b) {
  if (*in[a] != *in[b]) {
    return absl::InvalidArgumentError(
        absl::StrCat("operands ", a, " and ", b, " differ: ", in[a]->ToString(), " vs ", in[b]->ToString()));
  }
  return absl::OkStatus();
}

double TotalBytes(const InputTypes& in, const std::vector<TensorType>& out) {
  double bytes = 0;
  for (const TensorType* t : in) {
    if (t) bytes += static_cast<double>(t->num_bytes());
  }
  for (const TensorType& t : out) bytes += static_cast<double>(t.num_bytes());
  return bytes;
}

OpCost ElementwiseCost(const InputTypes& in, const std::vector<TensorType>& out, double flops_per_element) {
  double elements = 0;
  for (const TensorType& t : out) elements += static_cast<double>(t.num_elements());
  return {elements * flops_per_element, TotalBytes(in, out)};
}

absl::StatusOr<std::vector<Value*>> EmitGradOp(Builder& b, const Operation& op, const std::string& grad_type,
                                               const std::vector<Value*>& operands, const std::vector<int>& grad_of) {
  return EmitGradOp(b, op, grad_type, operands, grad_of, op.attrs());
}

absl::StatusOr<std::vector<Value*>> EmitGradOp(Builder& b, const Operation& op, const std::string& grad_type,
                                               const std::vector<Value*>& operands, const std::vector<int>& grad_of,
                                               const AttributeMap& attrs) {
  PDIST_ASSIGN_OR_RETURN(std::vector<Value*> results, b.Create(grad_type, operands, attrs));
  if (results.size() < grad_of.size()) {
    return absl::InternalError(absl::StrCat(grad_type, " has ", results.size(), " results, expected ", grad_of.size()));
  }
  std::vector<Value*> grads(op.num_operands(), nullptr);
  for (size_t i = 0; i < grad_of.size(); ++i) grads.at(static_cast<size_t>(grad_of[i])) = results[i];
  return grads;
}

absl::StatusOr<Value*> OrZeros(Builder& b, Value* grad, const Value* like) {
  if (grad != nullptr) return grad;
  return b.Op1("full", {}, {{"shape", like->type().shape}, {"value", 0.0}, {"dtype", like->type().dtype}});
}

void MarkLocalOnly(OpDef& def, const std::string& description) {
  // A local form of a gradient op stays a gradient op; anything else has no gradient.
  if (def.grad_kind != GradKind::kGradientOp) def.grad_kind = GradKind::kNotDifferentiable;
  def.grad = nullptr;
  def.local_only = true;
  const std::string name = def.name;
  def.infer_spmd = [name](const std::vector<TensorDistSpec>&, const SpmdContext&) -> absl::StatusOr<SpmdResult> {
    return absl::FailedPreconditionError(absl::StrCat(
        name, " belongs to partitioned per-rank programs; completion runs before partition"));
  };
  def.infer_spmd_reverse = [fwd = def.infer_spmd](const std::vector<TensorDistSpec>& in,
                                                  const std::vector<TensorDistSpec>&, const SpmdContext& ctx) {
    return fwd(in, ctx);
  };
  def.describe_spmd = [description](const std::vector<const TensorType*>&, const AttributeMap&) { return description; };
}

}  // namespace pdist::ir::ops
