// Axis collectives: block regrouping around the Communicator's dim-0 collectives.
#include "executor/comm/axis_collectives.h"

#include <cstring>

#include "absl/strings/str_cat.h"
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

// src [a, b, chunk bytes] → dst [b, a, chunk bytes].
void SwapLeadingBlocks(const void* src, void* dst, int64_t a, int64_t b, int64_t chunk_bytes) {
  const auto* in = static_cast<const char*>(src);
  auto* out = static_cast<char*>(dst);
  for (int64_t i = 0; i < a; ++i) {
    for (int64_t j = 0; j < b; ++j) {
      std::memcpy(out + (j * a + i) * chunk_bytes, in + (i * b + j) * chunk_bytes, static_cast<size_t>(chunk_bytes));
    }
  }
}

int64_t ElementBytes(const Tensor& t) { return ir::DataTypeSize(t.dtype()); }

Tensor Flat(const Tensor& t) { return t.Reshaped({t.num_elements()}); }

}  // namespace

absl::Status AllGatherAxis(Communicator& comm, const Tensor& in, int64_t axis, Tensor& out) {
  PDIST_ASSIGN_OR_RETURN(AxisView v, ViewAround(in, axis, "all_gather"));
  const int64_t n = comm.size();
  Tensor flat_out = Flat(out);
  if (v.outer == 1) return comm.AllGather(Flat(in), flat_out);
  Tensor gathered = Tensor::Empty({{n * in.num_elements()}, in.dtype()});
  PDIST_RETURN_IF_ERROR(comm.AllGather(Flat(in), gathered));
  // gathered [n, outer, dim·inner] → out [outer, n, dim·inner]
  SwapLeadingBlocks(gathered.raw(), out.raw(), n, v.outer, v.dim * v.inner * ElementBytes(in));
  return absl::OkStatus();
}

absl::Status ReduceScatterAxis(Communicator& comm, const Tensor& in, int64_t axis, ReduceOp op, Tensor& out) {
  PDIST_ASSIGN_OR_RETURN(AxisView v, ViewAround(in, axis, "reduce_scatter"));
  const int64_t n = comm.size();
  Tensor flat_out = Flat(out);
  if (v.outer == 1) return comm.ReduceScatter(Flat(in), flat_out, op);
  // in [outer, n, piece] → grouped [n, outer, piece], so that rank r's piece is contiguous.
  Tensor grouped = Tensor::Empty({{in.num_elements()}, in.dtype()});
  SwapLeadingBlocks(in.raw(), grouped.raw(), v.outer, n, v.dim / n * v.inner * ElementBytes(in));
  return comm.ReduceScatter(grouped, flat_out, op);
}

absl::Status AllToAllAxes(Communicator& comm, const Tensor& in, int64_t split_axis, int64_t concat_axis, Tensor& out) {
  PDIST_ASSIGN_OR_RETURN(AxisView split, ViewAround(in, split_axis, "all_to_all"));
  const int64_t n = comm.size();
  const int64_t esize = ElementBytes(in);
  // in [outer, n, piece] along split_axis → send [n, outer, piece]: piece s goes to rank s.
  Tensor send = Tensor::Empty({{in.num_elements()}, in.dtype()});
  SwapLeadingBlocks(in.raw(), send.raw(), split.outer, n, split.dim / n * split.inner * esize);
  Tensor received = Tensor::Empty(send.type());
  PDIST_RETURN_IF_ERROR(comm.AllToAll(send, received));
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
  SwapLeadingBlocks(received.raw(), out.raw(), n, outer, chunk * esize);
  return absl::OkStatus();
}

}  // namespace pdist::exec::comm
