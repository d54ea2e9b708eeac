// Partition: from a completed global program, the local program of one rank.
//
// Every value takes its local shape (the rank's piece under its DistAttr, which the value
// keeps: it says which global tensor the piece belongs to). Every `reshard` is planned
// (passes/reshard_plan.h) and lowered into the collective ops of ir/ops/collective.cc and local
// slices; ops whose attributes carry global sizes (reshape's and full's `shape`) get the local
// ones; the vocab-parallel embedding and cross entropy become their c_* forms, which know the
// rank's vocabulary range. Each op's local result types are then checked against its shape
// inference on the local operand types, so a rule that promised a layout the kernel cannot
// compute fails here, naming the op, instead of producing wrong numbers.
//
//   ReshardPlanCache plans;
//   for (int64_t r = 0; r < 4; ++r) {
//     PDIST_ASSIGN_OR_RETURN(ir::Program local, PartitionProgram(global, r, plans));
//   }
//
// Limits (errors name the value or op): every rank must be in every value's mesh (several
// meshes, i.e. pipeline stages, come with the pipeline pass); shards must be even.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "ir/program.h"
#include "passes/reshard_plan.h"

namespace pdist::passes {

absl::StatusOr<ir::Program> PartitionProgram(const ir::Program& global, int64_t rank, ReshardPlanCache& plans);

// The meshes of a completed program, each once, in first-use order: what CommGroups needs.
std::vector<ir::ProcessMesh> MeshesOf(const ir::Program& program);

}  // namespace pdist::passes
