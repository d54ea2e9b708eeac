// The global programs of a distributed run: the forward program annotated from the strategy,
// the training program (autodiff + optimizer) and the evaluation program, both completed, with
// a loss every rank can read (a Partial loss gets a final reshard to Replicate).
//
//   PDIST_ASSIGN_OR_RETURN(DistributedPrograms p, BuildDistributedPrograms(forward, strategy, optimizer));
//   PDIST_ASSIGN_OR_RETURN(ir::Program rank1, passes::PartitionProgram(p.train, 1, plans));
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/dist/process_mesh.h"
#include "ir/program.h"
#include "passes/optimizer.h"
#include "strategy/strategy.h"

namespace pdist::engine {

struct DistributedPrograms {
  ir::Program train;  // global, completed
  ir::Program eval;   // global forward, completed
  std::vector<ir::ProcessMesh> meshes;  // of the train program, for the communicators
  int64_t world_size = 1;
};

// Errors name what does not fit: a strategy feature this build cannot run yet (pipeline,
// sharding, recompute, amp, gradient merge), a mesh with more processes than the world.
absl::StatusOr<DistributedPrograms> BuildDistributedPrograms(const ir::Program& forward,
                                                             const strategy::Strategy& strategy,
                                                             const passes::OptimizerConfig& optimizer);

// The ranks a run needs: the strategy's dp × mp × pp, or more when its annotations or the
// program's own DistAttrs name higher ranks (meshes written by hand, one per pipeline stage).
int64_t WorldSizeOf(const strategy::Strategy& strategy, const ir::Program& program);

// Rejects strategy sections this build cannot execute, naming them.
absl::Status CheckExecutable(const strategy::Strategy& strategy);

}  // namespace pdist::engine
