// DistAttr: where a tensor lives — a ProcessMesh, a dims_mapping (tensor dim → mesh dim, -1 for
// replicated) and the mesh dims on which it holds partial values (Paddle's TensorDistAttr).
//
//   {mesh: [2,2] [x,y], dims_mapping: [0,-1], partial: {1: sum}}
//   = rows split over mesh dim x; along y each rank holds a partial sum.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/dist/placement.h"
#include "ir/dist/process_mesh.h"
#include "ir/types.h"

namespace pdist::ir {

using DimsMapping = std::vector<int64_t>;
using PartialDims = std::map<int64_t, ReduceType>;  // mesh dim → reduce type

struct DistAttr {
  ProcessMesh mesh;
  DimsMapping dims_mapping;  // one entry per tensor dim
  PartialDims partial;

  // Every dim replicated, nothing partial.
  static DistAttr Replicated(const ProcessMesh& mesh, int64_t tensor_rank);
  // One placement per mesh dim; errors name the placement and the mesh.
  static absl::StatusOr<DistAttr> FromPlacements(const ProcessMesh& mesh, int64_t tensor_rank,
                                                 const std::vector<Placement>& placements);
  std::vector<Placement> ToPlacements() const;

  // Checks the attribute against a tensor shape: one mapping entry per dim, mesh dims in range,
  // no mesh dim used twice (or both sharding and partial). InvalidArgument naming the problem.
  absl::Status Verify(const Shape& shape) const;

  bool is_partial() const { return !partial.empty(); }
  bool is_replicated() const;  // no sharding and no partial
  // Shape of the local piece on one rank (ceil division for uneven dims).
  Shape LocalShape(const Shape& global) const;

  // "{mesh: [2,2] [x,y], dims_mapping: [0,-1]}" (", partial: {1: sum}" when partial).
  std::string ToString() const;

  friend bool operator==(const DistAttr&, const DistAttr&) = default;
};

// "[0,-1]"
std::string DimsMappingToString(const DimsMapping& mapping);
// "{1: sum}"
std::string PartialDimsToString(const PartialDims& partial);

}  // namespace pdist::ir
