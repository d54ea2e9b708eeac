// Slicing a whole tensor into a rank's piece, and gathering pieces back.
#include "engine/shard_io.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "executor/comm/axis_collectives.h"
#include "ir/dist/local_slice.h"
#include "ir/status.h"

namespace pdist::engine {
namespace {

// Copies the box `slice` of `src` (shape `global`) into the dense `dst`, one contiguous run of
// the last dim at a time.
void CopyBox(const char* src, const ir::Shape& global, const ir::LocalSlice& slice, int64_t esize, char* dst) {
  const auto rank = static_cast<int64_t>(global.size());
  if (rank == 0) {
    std::memcpy(dst, src, static_cast<size_t>(esize));
    return;
  }
  std::vector<int64_t> stride(global.size(), 1);
  for (int64_t d = rank - 2; d >= 0; --d) stride[d] = stride[d + 1] * global[d + 1];
  const int64_t run = slice.sizes[rank - 1];
  int64_t runs = 1;
  for (int64_t d = 0; d + 1 < rank; ++d) runs *= slice.sizes[d];
  std::vector<int64_t> index(global.size(), 0);
  for (int64_t r = 0; r < runs; ++r) {
    int64_t offset = slice.offsets[rank - 1];
    for (int64_t d = 0; d + 1 < rank; ++d) offset += (slice.offsets[d] + index[d]) * stride[d];
    std::memcpy(dst + r * run * esize, src + offset * esize, static_cast<size_t>(run * esize));
    for (int64_t d = rank - 2; d >= 0 && ++index[d] == slice.sizes[d]; --d) index[d] = 0;
  }
}

}  // namespace

int64_t CopyOverlap(const char* src, const ir::LocalSlice& src_box, char* dst, const ir::LocalSlice& dst_box,
                    int64_t esize) {
  const size_t rank = src_box.sizes.size();
  if (rank == 0) {
    std::memcpy(dst, src, static_cast<size_t>(esize));
    return 1;
  }
  std::vector<int64_t> lo(rank), extent(rank);
  int64_t runs = 1;
  for (size_t d = 0; d < rank; ++d) {
    lo[d] = std::max(src_box.offsets[d], dst_box.offsets[d]);
    const int64_t hi = std::min(src_box.offsets[d] + src_box.sizes[d], dst_box.offsets[d] + dst_box.sizes[d]);
    if (hi <= lo[d]) return 0;
    extent[d] = hi - lo[d];
    if (d + 1 < rank) runs *= extent[d];
  }
  // Row-major strides of each piece.
  std::vector<int64_t> src_stride(rank, 1), dst_stride(rank, 1);
  for (size_t d = rank - 1; d-- > 0;) {
    src_stride[d] = src_stride[d + 1] * src_box.sizes[d + 1];
    dst_stride[d] = dst_stride[d + 1] * dst_box.sizes[d + 1];
  }
  std::vector<int64_t> index(rank, 0);  // within the overlap, over all dims but the last
  const int64_t run = extent[rank - 1];
  for (int64_t r = 0; r < runs; ++r) {
    int64_t s = 0, t = 0;
    for (size_t d = 0; d < rank; ++d) {
      const int64_t at = lo[d] + (d + 1 < rank ? index[d] : 0);
      s += (at - src_box.offsets[d]) * src_stride[d];
      t += (at - dst_box.offsets[d]) * dst_stride[d];
    }
    std::memcpy(dst + t * esize, src + s * esize, static_cast<size_t>(run * esize));
    for (size_t d = rank - 1; d-- > 0;) {
      if (++index[d] < extent[d]) break;
      index[d] = 0;
    }
  }
  return runs * run;
}

absl::StatusOr<exec::Tensor> SliceForRank(const exec::Tensor& whole, const ir::DistAttr& attr, int64_t rank) {
  if (attr.is_partial()) {
    return absl::InvalidArgumentError(absl::StrCat("a Partial tensor (", attr.ToString(), ") is not a slice of a whole one"));
  }
  PDIST_ASSIGN_OR_RETURN(ir::LocalSlice slice, ir::SliceOf(attr, whole.shape(), rank));
  exec::Tensor piece = exec::Tensor::Empty({slice.sizes, whole.dtype()});
  CopyBox(static_cast<const char*>(whole.raw()), whole.shape(), slice, ir::DataTypeSize(whole.dtype()),
          static_cast<char*>(piece.raw()));
  return piece;
}

absl::StatusOr<std::vector<std::map<std::string, exec::Tensor>>> SplitMicroBatchFeeds(
    const std::map<std::string, exec::Tensor>& whole, const std::vector<std::string>& split_inputs,
    int64_t micro_batches) {
  std::vector<std::map<std::string, exec::Tensor>> micro(static_cast<size_t>(micro_batches), whole);
  if (micro_batches == 1) return micro;
  const ir::ProcessMesh mesh = ir::ProcessMesh::Range({micro_batches}, {"micro_batch"});
  for (const std::string& name : split_inputs) {
    auto it = whole.find(name);
    if (it == whole.end()) continue;  // the executor names missing feeds
    const exec::Tensor& t = it->second;
    if (t.shape().empty() || t.shape()[0] % micro_batches != 0) {
      return absl::InvalidArgumentError(absl::StrCat("feed '", name, "' ", t.type().ToString(), " cannot be cut into ",
                                                     micro_batches, " micro-batches along dim 0"));
    }
    PDIST_ASSIGN_OR_RETURN(ir::DistAttr attr, ir::DistAttr::FromPlacements(mesh, t.type().rank(), {ir::Placement::Shard(0)}));
    for (int64_t k = 0; k < micro_batches; ++k) {
      PDIST_ASSIGN_OR_RETURN(micro[static_cast<size_t>(k)][name], SliceForRank(t, attr, k));
    }
  }
  return micro;
}

absl::StatusOr<exec::Tensor> GatherWhole(const exec::Tensor& piece, const ir::DistAttr& attr,
                                         exec::comm::CommGroups& groups) {
  if (attr.is_partial()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot gather a Partial tensor (", attr.ToString(), ")"));
  }
  exec::Tensor current = piece;
  for (size_t d = 0; d < attr.dims_mapping.size(); ++d) {
    const int64_t m = attr.dims_mapping[d];
    if (m < 0) continue;
    PDIST_ASSIGN_OR_RETURN(exec::comm::Communicator * group, groups.Get(attr.mesh.GroupAlong({m}, groups.rank())));
    ir::Shape shape = current.shape();
    shape[d] *= group->size();
    exec::Tensor gathered = exec::Tensor::Empty({shape, current.dtype()});
    PDIST_RETURN_IF_ERROR(exec::comm::AllGatherAxis(*group, current, static_cast<int64_t>(d), gathered));
    current = std::move(gathered);
  }
  return current;
}

}  // namespace pdist::engine
