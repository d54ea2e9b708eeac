// DistAttr: placements ↔ dims_mapping, Verify against a shape, local shapes and printing.
#include "ir/dist/dist_attr.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pdist::ir {

DistAttr DistAttr::Replicated(const ProcessMesh& mesh, int64_t tensor_rank) {
  return DistAttr{mesh, DimsMapping(static_cast<size_t>(tensor_rank), -1), {}};
}

absl::StatusOr<DistAttr> DistAttr::FromPlacements(const ProcessMesh& mesh, int64_t tensor_rank,
                                                  const std::vector<Placement>& placements) {
  if (static_cast<int64_t>(placements.size()) != mesh.ndim()) {
    return absl::InvalidArgumentError(absl::StrCat("placements ", PlacementsToString(placements), " give ",
                                                   placements.size(), " entries for the ", mesh.ndim(),
                                                   "-d mesh ", mesh.ToString(), " (one per mesh dim)"));
  }
  DistAttr attr = Replicated(mesh, tensor_rank);
  for (int64_t m = 0; m < mesh.ndim(); ++m) {
    const Placement& p = placements[m];
    const std::string where = absl::StrCat("placement ", m, " (", p.ToString(), ", mesh dim ", mesh.dim_names()[m], ")");
    if (p.is_partial()) {
      attr.partial[m] = p.reduce;
    } else if (p.is_shard()) {
      // Negative dims count from the end, as in DTensor's Shard(-1).
      const int64_t dim = p.dim < 0 ? p.dim + tensor_rank : p.dim;
      if (dim < 0 || dim >= tensor_rank) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": tensor dim ", p.dim, " is out of range for a rank-", tensor_rank, " tensor"));
      }
      if (attr.dims_mapping[dim] != -1) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": tensor dim ", dim, " is already sharded by mesh dim ",
                                                       attr.dims_mapping[dim], " (one mesh dim per tensor dim)"));
      }
      attr.dims_mapping[dim] = m;
    }
  }
  return attr;
}

std::vector<Placement> DistAttr::ToPlacements() const {
  std::vector<Placement> placements(static_cast<size_t>(mesh.ndim()), Placement::Replicate());
  for (const auto& [m, reduce] : partial) {
    if (m >= 0 && m < mesh.ndim()) placements[m] = Placement::Partial(reduce);
  }
  // Sharding wins over partial for a (Verify-invalid) attr that has both; the lowest tensor
  // dim wins when one mesh dim shards several.
  for (size_t t = dims_mapping.size(); t-- > 0;) {
    const int64_t m = dims_mapping[t];
    if (m >= 0 && m < mesh.ndim()) placements[m] = Placement::Shard(static_cast<int64_t>(t));
  }
  return placements;
}

absl::Status DistAttr::Verify(const Shape& shape) const {
  auto error = [this](const std::string& message) {
    return absl::InvalidArgumentError(absl::StrCat("dist attr ", ToString(), ": ", message));
  };
  if (mesh.empty()) return error("has no process mesh");
  if (dims_mapping.size() != shape.size()) {
    return error(absl::StrCat("dims_mapping ", DimsMappingToString(dims_mapping), " has ", dims_mapping.size(),
                              " entries for a tensor of shape ", ShapeToString(shape), " (rank ", shape.size(), ")"));
  }
  std::vector<int64_t> user(static_cast<size_t>(mesh.ndim()), -1);  // mesh dim → tensor dim sharded by it
  for (size_t t = 0; t < dims_mapping.size(); ++t) {
    const int64_t m = dims_mapping[t];
    if (m == -1) continue;
    if (m < -1 || m >= mesh.ndim()) {
      return error(absl::StrCat("dims_mapping entry ", t, " is mesh dim ", m, ", out of range for mesh ",
                                mesh.ToString(), " (expected -1 or 0..", mesh.ndim() - 1, ")"));
    }
    if (user[m] != -1) {
      return error(absl::StrCat("mesh dim ", m, " (", mesh.dim_names()[m], ") shards both tensor dim ", user[m],
                                " and tensor dim ", t));
    }
    user[m] = static_cast<int64_t>(t);
  }
  for (const auto& [m, reduce] : partial) {
    if (m < 0 || m >= mesh.ndim()) {
      return error(absl::StrCat("partial mesh dim ", m, " is out of range for mesh ", mesh.ToString()));
    }
    if (user[m] != -1) {
      return error(absl::StrCat("mesh dim ", m, " (", mesh.dim_names()[m], ") is both sharding tensor dim ", user[m],
                                " and partial (", ReduceTypeName(reduce), ")"));
    }
  }
  return absl::OkStatus();
}

bool DistAttr::is_replicated() const {
  if (is_partial()) return false;
  for (int64_t m : dims_mapping) {
    if (m != -1) return false;
  }
  return true;
}

Shape DistAttr::LocalShape(const Shape& global) const {
  Shape local = global;
  for (size_t t = 0; t < local.size() && t < dims_mapping.size(); ++t) {
    const int64_t m = dims_mapping[t];
    if (m < 0 || m >= mesh.ndim()) continue;
    const int64_t parts = mesh.dim_size(m);
    local[t] = (local[t] + parts - 1) / parts;  // ceil: the first ranks hold the larger pieces
  }
  return local;
}

std::string DistAttr::ToString() const {
  std::string text = absl::StrCat("{mesh: ", mesh.ToString(), ", dims_mapping: ", DimsMappingToString(dims_mapping));
  if (!partial.empty()) absl::StrAppend(&text, ", partial: ", PartialDimsToString(partial));
  return text + "}";
}

std::string DimsMappingToString(const DimsMapping& mapping) {
  return absl::StrCat("[", absl::StrJoin(mapping, ","), "]");
}

std::string PartialDimsToString(const PartialDims& partial) {
  std::vector<std::string> items;
  for (const auto& [m, reduce] : partial) items.push_back(absl::StrCat(m, ": ", ReduceTypeName(reduce)));
  return absl::StrCat("{", absl::StrJoin(items, ", "), "}");
}

}  // namespace pdist::ir
