// ShardTensor: placements → DistAttr on one value, marked annotated.
#include "ir/dist/shard_tensor.h"

#include <algorithm>

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
  // A parameter is stored: whole or in shards. A Partial is a sum ops leave pending; as a
  // parameter's placement every rank initialised its own copy, and the model summed them (a
  // partial embedding table trained to other losses than one rank's). A data input may come
  // partial (the caller's sums), as the SPMD rules' brute-force check feeds them.
  if (value->role() == ValueRole::kParameter && attr->is_partial()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", DescribeValue(*value),
                                                   " is stored, so whole or in shards: Partial() is a pending sum that "
                                                   "ops leave; use Shard(d) or Replicate()"));
  }
  PDIST_RETURN_IF_ERROR(WithContext(attr->Verify(value->type().shape), what));
  value->set_dist_attr(*std::move(attr));
  value->set_dist_annotated(true);
  return absl::OkStatus();
}

bool HasPlacements(const Program& program) {
  for (int64_t id = 0; id < program.num_values(); ++id) {
    if (program.FindValue(id)->dist_attr()) return true;
  }
  return false;
}

int64_t RanksNamedBy(const Program& program) {
  int64_t ranks = 1;
  for (int64_t id = 0; id < program.num_values(); ++id) {
    const Value* v = program.FindValue(id);
    if (!v->dist_attr()) continue;
    for (int64_t p : v->dist_attr()->mesh.process_ids()) ranks = std::max(ranks, p + 1);
  }
  return ranks;
}

}  // namespace pdist::ir
