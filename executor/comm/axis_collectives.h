// Collectives along any tensor axis, built on the Communicator's dim-0 collectives: the data
// movement the lowered reshard ops (c_allgather, c_reduce_scatter, c_alltoall) perform.
//
// A Communicator concatenates and splits along dim 0 only (like NCCL, which sees flat
// buffers). Along another axis the pieces are interleaved in memory, so these functions
// regroup blocks before or after the dim-0 collective:
//
//   x f32[4,6] on each of 2 ranks, AllGatherAxis(comm, x, /*axis=*/1, out)  → out f32[4,12]
//   = [x_0 | x_1] side by side, row by row.
//
// The tensors may be on any device: `place` says where the temporaries come from and which
// backend regroups the blocks, on which stream (the communicator enqueues there too).
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "executor/comm/communicator.h"
#include "executor/tensor.h"

namespace pdist::exec {
class Allocator;
class Backend;
}  // namespace pdist::exec

namespace pdist::exec::comm {

// Where an axis collective's data lives: the tensors' device.
struct DataPlace {
  Backend* backend;      // regroups blocks on the device
  Allocator* allocator;  // temporaries
  Stream* stream;        // ordering; nullptr: the host's order
  // Where the temporaries are kept until the work enqueued on `stream` has run (a kernel's
  // KernelContext::Scratch list); nullptr: they die with the call, which is right only where
  // blocks are freed in the stream's own order (the host).
  std::vector<Tensor>* keep_alive = nullptr;
  static DataPlace Host();
};

// out = concat over the group's ranks (in group order) of `in` along `axis`.
absl::Status AllGatherAxis(Communicator& comm, const Tensor& in, int64_t axis, Tensor& out,
                           const DataPlace& place = DataPlace::Host());
// out = this rank's piece, along `axis`, of the reduction of every rank's `in`.
absl::Status ReduceScatterAxis(Communicator& comm, const Tensor& in, int64_t axis, ReduceOp op, Tensor& out,
                               const DataPlace& place = DataPlace::Host());
// Splits `in` along `split_axis` into one piece per rank, exchanges them, and concatenates the
// received pieces along `concat_axis`: Shard(concat_axis) → Shard(split_axis).
absl::Status AllToAllAxes(Communicator& comm, const Tensor& in, int64_t split_axis, int64_t concat_axis, Tensor& out,
                          const DataPlace& place = DataPlace::Host());

}  // namespace pdist::exec::comm
