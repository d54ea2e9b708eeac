// ShardTensor: placements → DistAttr on one value, marked annotated.
#include "ir/dist/shard_tensor.h"

#include "absl/strings/str_cat.h"
#include "ir/status.h"

namespace pdist::ir {

std::string DescribeValue(const Value& value) {
  if (!value.name().empty()) return absl::StrCat("'", value.name(), "'");
  return absl::StrCat("value id ", value.id());
}

absl::Status ShardTensor(Value* value, const ProcessMesh& mesh, const std::vector<Placement>& placements) {
  if (value == nullptr) return absl::InvalidArgumentError("ShardTensor: the value is null");
  const std::string what = absl::StrCat("shard_tensor(", DescribeValue(*value), " ", value->type().ToString(), ", ",
                                        PlacementsToString(placements), ")");
  if (mesh.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": the process mesh is empty"));
  absl::StatusOr<DistAttr> attr = DistAttr::FromPlacements(mesh, value->type().rank(), placements);
  if (!attr.ok()) return WithContext(attr.status(), what);
  PDIST_RETURN_IF_ERROR(WithContext(attr->Verify(value->type().shape), what));
  value->set_dist_attr(*std::move(attr));
  value->set_dist_annotated(true);
  return absl::OkStatus();
}

}  // namespace pdist::ir
