// Memory planner: when each intermediate tensor of a program can be freed, and the peak of live
// bytes that schedule implies.
//
//   %2 = matmul(%0, %1)      live: %2
//   %3 = relu(%2)            live: %2 %3   → %2 freed after this op (its last use)
//   %4 = sum(%3)             live: %3 %4   → %3 freed
#pragma once

#include <cstdint>
#include <vector>

#include "ir/program.h"

namespace pdist::exec {

struct MemoryPlan {
  // release_after[i]: value ids whose last use is op i (freed right after it runs).
  std::vector<std::vector<int64_t>> release_after;
  // Values never freed during a run: the loss, update sources, fetched values.
  std::vector<int64_t> kept;
  // Peak of live intermediate bytes under this plan, counting every result as its own buffer
  // (views such as reshape share storage at run time, so the measured peak can be lower).
  int64_t estimated_peak_bytes = 0;
};

// `keep` lists extra value ids that must survive the run (fetches).
MemoryPlan PlanMemory(const ir::Program& program, const std::vector<int64_t>& keep);

}  // namespace pdist::exec
