// Upgrades of result types older pdist files spell differently.
#include "ir/legacy_types.h"

#include "ir/builder.h"
#include "ir/op_def.h"
#include "ir/status.h"

namespace pdist::ir {

namespace {

// Results that once had x's dtype and now have the type their op computes in.
bool IsStatistic(const std::string& op_type, size_t index) {
  return (op_type == "layer_norm" && (index == 1 || index == 2)) || (op_type == "rms_norm" && index == 1) ||
         ((op_type == "flash_attn" || op_type == "flash_attention") && index == 2);
}

}  // namespace

bool IsLegacyResultType(const std::string& op_type, size_t index, const TensorType& written, const TensorType& inferred,
                        DataType x_dtype) {
  if (!IsStatistic(op_type, index) || written == inferred || written.num_elements() != inferred.num_elements()) {
    return false;
  }
  const bool norm = op_type == "layer_norm" || op_type == "rms_norm";  // only norms wrote flattened statistics
  const bool flattened = norm && written.rank() == 1 && written.shape != inferred.shape;
  const bool low_precision = IsLowPrecisionFloat(written.dtype) && written.dtype == x_dtype &&
                             inferred.dtype == ComputeDtype(written.dtype);
  return (flattened || written.shape == inferred.shape) && (written.dtype == inferred.dtype || low_precision);
}

void UpgradeLegacyResult(Value& r, const TensorType& want) {
  if (r.dist_attr() && r.type().shape != want.shape) {
    DistAttr attr = *r.dist_attr();
    const int64_t mesh_dim = attr.dims_mapping.empty() ? -1 : attr.dims_mapping[0];
    attr.dims_mapping.assign(want.shape.size(), -1);
    for (size_t d = 0; d < want.shape.size() && mesh_dim >= 0; ++d) {
      if (want.shape[d] > 1) {
        attr.dims_mapping[d] = mesh_dim;
        break;
      }
    }
    r.set_dist_attr(std::move(attr));
  }
  r.set_type(want);
}

absl::Status UpgradeLegacyResultTypes(Program& program) {
  for (const auto& op : program.block().ops()) {
    if (!IsStatistic(op->type(), 1) && !IsStatistic(op->type(), 2)) continue;
    if (op->num_operands() == 0 || op->operand(0) == nullptr) continue;  // the verifier names it
    const OpDef* def = OpRegistry::Global().Find(op->type());
    if (def == nullptr) continue;
    absl::StatusOr<std::vector<TensorType>> inferred = InferResultTypes(*def, op->operands(), op->attrs());
    if (!inferred.ok() || inferred->size() != op->num_results()) continue;  // the verifier names it
    for (size_t i = 0; i < op->num_results(); ++i) {
      Value* r = op->result(i);
      const TensorType& want = (*inferred)[i];
      if (IsLegacyResultType(op->type(), i, r->type(), want, op->operand(0)->type().dtype)) UpgradeLegacyResult(*r, want);
    }
  }
  return absl::OkStatus();
}

}  // namespace pdist::ir
