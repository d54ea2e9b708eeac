// Remesh: one distribution said on another mesh over the same processes. Hybrid sharded data
// parallelism (ZeRO over part of dp, docs/sharding.md) updates its parameters on a mesh whose dp
// dim is split in two — replicas × shards — while the forward and backward run on the mesh with
// dp whole. Both meshes list the same processes in the same order, so a tensor replicated (or
// partial) along dp is replicated (or partial) along both halves: the same local pieces on the
// same ranks, and moving between the two meshes costs nothing.
//
//   coarse [4,2] [dp,mp], fine [2,2,2] [dp_replica,dp_shard,mp], same ids 0..7
//   {coarse, dims_mapping: [-1,1], partial: {0: sum}}
//     → {fine, dims_mapping: [-1,2], partial: {0: sum, 1: sum}}
//   {fine, dims_mapping: [1,-1]} (rows over dp_shard) → nullopt on coarse: a shard over half of
//     dp is no placement of the coarse mesh.
#pragma once

#include <cstdint>
#include <optional>

#include "ir/dist/dist_attr.h"

namespace pdist::ir {

// The mesh dim of `coarse` that `fine` splits into its dims k and k+1, when both meshes hold the
// same process ids in the same order and agree on every other dim (size and name); nullopt otherwise.
std::optional<int64_t> SplitDimOf(const ProcessMesh& coarse, const ProcessMesh& fine);

// `attr` on `to`, when one of attr.mesh and `to` splits a dim of the other (SplitDimOf) and every
// placement carries over: a dim replicated or partial whole ↔ both halves alike. A tensor dim
// sharded over the split dim (or over one half) has no counterpart: nullopt.
std::optional<DistAttr> Remesh(const DistAttr& attr, const ProcessMesh& to);

}  // namespace pdist::ir
