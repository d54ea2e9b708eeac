// ReshardPrimitive: one kind of step of a reshard plan (passes/reshard_plan.h), defined in one
// file of passes/reshard/ and listed once in registry.cc: when the planner takes it, the step it
// makes, and how partition lowers it on a rank. What it costs follows from the op it lowers to
// (OpDef::collective, priced by planner/comm_cost.h), so planning, lowering and pricing read the
// same definition.
//
//   along mesh dim 0 of [2] [dp]:  P → S(0)   reduce_scatter  (phase 1: leaves a Partial)
//                                  → c_reduce_scatter(x) {axis = 0, reduce = "sum", ranks = [0, 1]}
//
// Phase 1 leaves every source placement that differs from its target (the first primitive of
// the list that applies is taken); phase 2 reaches the targets still missing from Replicate.
// The move between meshes (send_recv) is no phase's: the planner adds it around the phases, and
// partition lowers it with both of its ends.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/builder.h"
#include "ir/dist/placement.h"
#include "passes/reshard_plan.h"

namespace pdist::passes {

struct ReshardPrimitive {
  ReshardStep::Kind kind;
  const char* name;   // as plans print it: "all_reduce"
  int phase = 0;      // 1, 2, or 0: not chosen per mesh dim
  // Whether it takes one mesh dim from `from` to `to`; `to_dim_free`: `to` is a Shard of a
  // tensor dim no other mesh dim shards.
  std::function<bool(const ir::Placement& from, const ir::Placement& to, bool to_dim_free)> applies;
  // The step (kind, tensor dims, reduce) and the placement the mesh dim has after it.
  std::function<std::pair<ReshardStep, ir::Placement>(const ir::Placement& from, const ir::Placement& to)> make;
  // This rank's op from x's piece before the step to its piece after (`step.after` holds the
  // state after it); returns x itself when the rank needs no op.
  std::function<absl::StatusOr<ir::Value*>(ir::Builder& b, const ReshardStep& step, ir::Value* x, int64_t rank)> lower;
};

// Every primitive, in the planner's order of preference within a phase.
const std::vector<ReshardPrimitive>& ReshardPrimitives();
const ReshardPrimitive& ReshardPrimitiveOf(ReshardStep::Kind kind);

// The ranks of the group `rank` reduces or gathers with along the step's mesh dim, as the c_*
// ops' `ranks` attribute; and `rank`'s coordinate along that dim.
std::vector<int64_t> StepGroup(const ReshardStep& step, int64_t rank);
int64_t StepCoordinate(const ReshardStep& step, int64_t rank);

// A step of `kind` along a mesh dim (set by the planner) with the given dims and reduction.
ReshardStep MakeStep(ReshardStep::Kind kind, int64_t tensor_dim = -1, ir::ReduceType reduce = ir::ReduceType::kSum,
                     int64_t from_tensor_dim = -1);

// The definitions, one per file.
ReshardPrimitive AllReducePrimitive();
ReshardPrimitive AllGatherPrimitive();
ReshardPrimitive ReduceScatterPrimitive();
ReshardPrimitive AllToAllPrimitive();
ReshardPrimitive SlicePrimitive();
ReshardPrimitive MakePartialPrimitive();
ReshardPrimitive SendRecvPrimitive();
ReshardPrimitive RemeshPrimitive();

}  // namespace pdist::passes
