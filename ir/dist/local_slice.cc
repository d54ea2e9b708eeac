// LocalSlice: offsets and sizes of a rank's piece.
#include "ir/dist/local_slice.h"

#include "absl/strings/str_cat.h"

namespace pdist::ir {

absl::StatusOr<LocalSlice> SliceOf(const DistAttr& attr, const Shape& global, int64_t rank) {
  const std::vector<int64_t> coord = attr.mesh.CoordinateOf(rank);
  if (coord.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " is not in mesh ", attr.mesh.ToString()));
  }
  if (attr.dims_mapping.size() != global.size()) {
    return absl::InvalidArgumentError(absl::StrCat("dims_mapping ", DimsMappingToString(attr.dims_mapping),
                                                   " does not fit shape ", ShapeToString(global)));
  }
  LocalSlice slice{Shape(global.size(), 0), global};
  for (size_t d = 0; d < global.size(); ++d) {
    const int64_t m = attr.dims_mapping[d];
    if (m < 0) continue;
    const int64_t ways = attr.mesh.dim_size(m);
    if (global[d] % ways != 0) {
      return absl::InvalidArgumentError(absl::StrCat("tensor dim ", d, " of size ", global[d],
                                                     " does not split evenly over ", ways, " ranks"));
    }
    slice.sizes[d] = global[d] / ways;
    slice.offsets[d] = coord[static_cast<size_t>(m)] * slice.sizes[d];
  }
  return slice;
}

Shape GlobalShapeOf(const DistAttr& attr, const Shape& local) {
  Shape global = local;
  for (size_t d = 0; d < global.size() && d < attr.dims_mapping.size(); ++d) {
    const int64_t m = attr.dims_mapping[d];
    if (m >= 0) global[d] *= attr.mesh.dim_size(m);
  }
  return global;
}

}  // namespace pdist::ir
