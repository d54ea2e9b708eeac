// RegisterAllOps: the single list of op families.
#include "ir/op_def.h"
#include "ir/ops/op_families.h"
#include "ir/status.h"

namespace pdist::ir {

absl::Status RegisterAllOps(OpRegistry& registry) {
  PDIST_RETURN_IF_ERROR(RegisterElementwiseOps(registry));
  PDIST_RETURN_IF_ERROR(RegisterBroadcastOps(registry));
  PDIST_RETURN_IF_ERROR(RegisterGatherOps(registry));
  PDIST_RETURN_IF_ERROR(RegisterActivationOps(registry));
  PDIST_RETURN_IF_ERROR(RegisterMatmulOps(registry));
  PDIST_RETURN_IF_ERROR(RegisterFusedOps(registry));
  PDIST_RETURN_IF_ERROR(RegisterReductionOps(registry));
  PDIST_RETURN_IF_ERROR(RegisterShapeOps(registry));
  PDIST_RETURN_IF_ERROR(RegisterNormOps(registry));
  PDIST_RETURN_IF_ERROR(RegisterNnOps(registry));
  PDIST_RETURN_IF_ERROR(RegisterOptimizerOps(registry));
  PDIST_RETURN_IF_ERROR(RegisterLossScalingOps(registry));
  PDIST_RETURN_IF_ERROR(RegisterReshardOps(registry));
  PDIST_RETURN_IF_ERROR(RegisterCollectiveOps(registry));
  PDIST_RETURN_IF_ERROR(RegisterLocalForms(registry));
  return absl::OkStatus();
}

}  // namespace pdist::ir
