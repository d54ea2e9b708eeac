// Moving whole tensors to and from a rank's pieces: the engine cuts each global batch into the
// rank's feed, and gathers parameter pieces back into whole tensors for checkpoints and for
// comparing a distributed run with a single-rank one.
//
//   PDIST_ASSIGN_OR_RETURN(exec::Tensor mine, SliceForRank(tokens, *arg->dist_attr(), rank));
//   PDIST_ASSIGN_OR_RETURN(exec::Tensor whole, GatherWhole(piece, *param->dist_attr(), groups));
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "executor/comm/comm_groups.h"
#include "executor/tensor.h"
#include "ir/dist/dist_attr.h"
#include "ir/dist/local_slice.h"

namespace pdist::engine {

// Copies the part of the piece `src` (the box `src_box` of a global tensor) that lies in `dst_box`
// into the piece `dst`; returns the elements copied (0 when the boxes do not overlap). Both
// pieces are dense, row-major, of `esize`-byte elements.
int64_t CopyOverlap(const char* src, const ir::LocalSlice& src_box, char* dst, const ir::LocalSlice& dst_box,
                    int64_t esize);

// The rank's piece of `whole` under `attr` (a copy). Partial placements are not pieces of a
// whole tensor: InvalidArgument.
absl::StatusOr<exec::Tensor> SliceForRank(const exec::Tensor& whole, const ir::DistAttr& attr, int64_t rank);

// The feeds of each of `micro_batches` micro-batches: the `split_inputs` cut along dim 0 into
// equal consecutive parts, the other feeds (the learning rate) whole in each.
absl::StatusOr<std::vector<std::map<std::string, exec::Tensor>>> SplitMicroBatchFeeds(
    const std::map<std::string, exec::Tensor>& whole, const std::vector<std::string>& split_inputs,
    int64_t micro_batches);

// The whole tensor from every rank's `piece`: all-gathers along each sharded mesh dim.
// Collective over the mesh: every rank of it calls this, in the same order.
absl::StatusOr<exec::Tensor> GatherWhole(const exec::Tensor& piece, const ir::DistAttr& attr,
                                         exec::comm::CommGroups& groups);

}  // namespace pdist::engine
