// ValidateSpecs: the checks every rule entry point runs on the specs it is given.
#include "ir/spmd/spmd_rule.h"

#include "absl/strings/str_cat.h"

namespace pdist::ir {

absl::Status ValidateSpecs(const std::vector<TensorDistSpec>& specs, const std::vector<int64_t>& mesh_shape,
                           const char* what) {
  // A rule ignores process ids, so any mesh of this shape checks the same: DistAttr::Verify is
  // the one place that knows what a valid mapping is.
  absl::StatusOr<ProcessMesh> mesh = ProcessMesh::Create(mesh_shape, {}, {});
  if (!mesh.ok()) return mesh.status();
  for (size_t i = 0; i < specs.size(); ++i) {
    const TensorDistSpec& spec = specs[i];
    if (spec.absent()) continue;
    absl::Status valid = DistAttr{*mesh, spec.dims_mapping, spec.partial}.Verify(spec.shape);
    if (!valid.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " ", i, " (shape ", ShapeToString(spec.shape), "): ", valid.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace pdist::ir
