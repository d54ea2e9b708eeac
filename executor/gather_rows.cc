// GatherViewOf: the [outer, axis, inner] view and the checked, normalised indices.
#include "executor/gather_rows.h"

#include "absl/strings/str_cat.h"
#include "executor/dtype_dispatch.h"

namespace pdist::exec {

absl::StatusOr<GatherView> GatherViewOf(const ir::Shape& x_shape, int64_t axis, const Tensor& index, const char* op) {
  if (axis < 0) axis += static_cast<int64_t>(x_shape.size());
  GatherView v;
  for (int64_t d = 0; d < static_cast<int64_t>(x_shape.size()); ++d) {
    int64_t& part = d < axis ? v.outer : d == axis ? v.axis : v.inner;
    part *= x_shape[static_cast<size_t>(d)];
  }
  v.rows.resize(static_cast<size_t>(index.num_elements()));
  PDIST_DISPATCH_INDEX(index.dtype(), I, {
    const I* at = index.data<I>();
    for (size_t j = 0; j < v.rows.size(); ++j) {
      const int64_t i = static_cast<int64_t>(at[j]);
      if (i < -v.axis || i >= v.axis) {
        return absl::InvalidArgumentError(absl::StrCat(op, ": index ", i, " (element ", j, ") is out of range for an axis of ",
                                                       v.axis, " (valid: ", -v.axis, " to ", v.axis - 1, ")"));
      }
      v.rows[j] = i < 0 ? i + v.axis : i;
    }
  });
  return v;
}

}  // namespace pdist::exec
