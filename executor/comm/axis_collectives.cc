// Axis collectives: block regrouping around the Communicator's dim-0 collectives.
#include "executor/comm/axis_collectives.h"

#include "absl/strings/str_cat.h"
#include "executor/allocator.h"
#include "executor/backend.h"
#include "ir/status.h"

namespace pdist::exec::comm {
namespace {

// A tensor seen as [outer, axis, inner] in elements.
struct AxisView {
  int64_t outer = 1, dim = 1, inner = 1;
};

absl::StatusOr<AxisView> ViewAround(const Tensor& t, int64_t axis, const char* what) {
  const Shape& s = t.shape();
  if (axis < 0 || axis >= static_cast<int64_t>(s.size())) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": axis ", axis, " is out of range for ", t.type().ToString()));
  }
  AxisView v;
  for (int64_t d = 0; d < axis; ++d) v.outer *= s[static_cast<size_t>(d)];
  v.dim = s[static_cast<size_t>(axis)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < s.size(); ++d) v.inner *= s[d];
  return v;
}

Tensor Flat(const Tensor& t) { return t.Reshaped({t.num_elements()}); }

Tensor Temporary(const TensorType& type, const DataPlace& place) {
  Tensor t = Tensor::Empty(type, *place.allocator, place.stream);
  if (place.keep_alive != nullptr) place.keep_alive->push_back(t);
  return t;
}

}  // namespace

DataPlace DataPlace::Host() {
  return {BackendFor(Device::Cpu()).value(), &HostAllocator::Instance(), nullptr};  // the host is always there
}

absl::Status AllGatherAxis(Communicator& comm, const Tensor& in, int64_t axis, Tensor& out, const DataPlace& place) {
  PDIST_ASSIGN_OR_RETURN(AxisView v, ViewAround(in, axis, "all_gather"));
  const int64_t n = comm.size();
  Tensor flat_out = Flat(out);
  if (v.outer == 1) return comm.AllGather(Flat(in), flat_out, place.stream);
  Tensor gathered = Temporary({{n * in.num_elements()}, in.dtype()}, place);
  PDIST_RETURN_IF_ERROR(comm.AllGather(Flat(in), gathered, place.stream));
  // gathered [n, outer, dim·inner] → out [outer, n, dim·inner]
  return place.backend->SwapBlocks(gathered, flat_out, n, v.outer, v.dim * v.inner, place.stream);
}

absl::Status ReduceScatterAxis(Communicator& comm, const Tensor& in, int64_t axis, ReduceOp op, Tensor& out,
                               const DataPlace& place) {
  PDIST_ASSIGN_OR_RETURN(AxisView v, ViewAround(in, axis, "reduce_scatter"));
  const int64_t n = comm.size();
  Tensor flat_out = Flat(out);
  if (v.outer == 1) return comm.ReduceScatter(Flat(in), flat_out, op, place.stream);
  // in [outer, n, piece] → grouped [n, outer, piece], so that rank r's piece is contiguous.
  Tensor grouped = Temporary({{in.num_elements()}, in.dtype()}, place);
  PDIST_RETURN_IF_ERROR(place.backend->SwapBlocks(in, grouped, v.outer, n, v.dim / n * v.inner, place.stream));
  return comm.ReduceScatter(grouped, flat_out, op, place.stream);
}

absl::Status AllToAllAxes(Communicator& comm, const Tensor& in, int64_t split_axis, int64_t concat_axis, Tensor& out,
                          const DataPlace& place) {
  PDIST_ASSIGN_OR_RETURN(AxisView split, ViewAround(in, split_axis, "all_to_all"));
  const int64_t n = comm.size();
  // in [outer, n, piece] along split_axis → send [n, outer, piece]: piece s goes to rank s.
  Tensor send = Temporary({{in.num_elements()}, in.dtype()}, place);
  PDIST_RETURN_IF_ERROR(place.backend->SwapBlocks(in, send, split.outer, n, split.dim / n * split.inner, place.stream));
  Tensor received = Temporary(send.type(), place);
  PDIST_RETURN_IF_ERROR(comm.AllToAll(send, received, place.stream));
  // received [n (source rank), piece]; a piece is `in` with split_axis divided by n.
  Shape piece_shape = in.shape();
  piece_shape[static_cast<size_t>(split_axis)] /= n;
  if (concat_axis < 0 || concat_axis >= static_cast<int64_t>(piece_shape.size())) {
    return absl::InvalidArgumentError(absl::StrCat("all_to_all: concat axis ", concat_axis, " is out of range for ",
                                                   in.type().ToString()));
  }
  int64_t outer = 1, chunk = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(piece_shape.size()); ++d) {
    (d < concat_axis ? outer : chunk) *= piece_shape[static_cast<size_t>(d)];
  }
  // received [n, outer, chunk] → out [outer, n, chunk]: the pieces side by side along concat_axis.
  return place.backend->SwapBlocks(received, out, n, outer, chunk, place.stream);
}

}  // namespace pdist::exec::comm
