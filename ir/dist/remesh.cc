// Remesh: placements carried between a mesh and the mesh that splits one of its dims in two.
#include "ir/dist/remesh.h"

namespace pdist::ir {
namespace {

// Coarse attr → fine: mesh dims after the split move up by one; a partial dim becomes both halves.
std::optional<DistAttr> Refine(const DistAttr& attr, const ProcessMesh& fine, int64_t k) {
  DistAttr out{fine, attr.dims_mapping, {}};
  for (int64_t& m : out.dims_mapping) {
    if (m == k) return std::nullopt;  // one tensor dim over both halves: not a placement
    if (m > k) ++m;
  }
  for (const auto& [m, reduce] : attr.partial) {
    if (m == k) {
      out.partial[k] = reduce;
      out.partial[k + 1] = reduce;
    } else {
      out.partial[m > k ? m + 1 : m] = reduce;
    }
  }
  return out;
}

// Fine attr → coarse: both halves must agree (replicated, or partial with one reduce type).
std::optional<DistAttr> Coarsen(const DistAttr& attr, const ProcessMesh& coarse, int64_t k) {
  DistAttr out{coarse, attr.dims_mapping, {}};
  for (int64_t& m : out.dims_mapping) {
    if (m == k || m == k + 1) return std::nullopt;
    if (m > k + 1) --m;
  }
  const auto low = attr.partial.find(k), high = attr.partial.find(k + 1);
  if ((low == attr.partial.end()) != (high == attr.partial.end())) return std::nullopt;
  if (low != attr.partial.end() && low->second != high->second) return std::nullopt;
  for (const auto& [m, reduce] : attr.partial) {
    if (m == k + 1) continue;
    out.partial[m > k + 1 ? m - 1 : m] = reduce;
  }
  return out;
}

}  // namespace

std::optional<int64_t> SplitDimOf(const ProcessMesh& coarse, const ProcessMesh& fine) {
  if (coarse.process_ids() != fine.process_ids() || fine.ndim() != coarse.ndim() + 1) return std::nullopt;
  for (int64_t k = 0; k < coarse.ndim(); ++k) {
    bool match = coarse.dim_size(k) == fine.dim_size(k) * fine.dim_size(k + 1);
    for (int64_t d = 0; match && d < coarse.ndim(); ++d) {
      if (d == k) continue;
      const auto f = static_cast<size_t>(d < k ? d : d + 1);
      match = coarse.shape()[static_cast<size_t>(d)] == fine.shape()[f] &&
              coarse.dim_names()[static_cast<size_t>(d)] == fine.dim_names()[f];
    }
    if (match) return k;
  }
  return std::nullopt;
}

std::optional<DistAttr> Remesh(const DistAttr& attr, const ProcessMesh& to) {
  if (attr.mesh == to) return attr;
  if (std::optional<int64_t> k = SplitDimOf(attr.mesh, to)) return Refine(attr, to, *k);
  if (std::optional<int64_t> k = SplitDimOf(to, attr.mesh)) return Coarsen(attr, to, *k);
  return std::nullopt;
}

}  // namespace pdist::ir
