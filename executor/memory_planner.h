// Memory planner: when each intermediate tensor of a program can be freed, when each updated
// state can take its new value, and the peak of live bytes that schedule implies.
//
//   %2 = matmul(%0, %1)      live: %2
//   %3 = relu(%2)            live: %2 %3   → %2 freed after this op (its last use)
//   %4 = sum(%3)             live: %3 %4   → %3 freed
//
//   %9, %10 = adamw(%w, %g, ...)           → after this op `update %w <- %9` is installed: %w is
//   update %w <- %9                          read by nothing later, so its old tensor is freed
//                                            and %9 becomes the persistent one (an in-place update)
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
  // install_after[i]: indices into program.updates() whose new value can replace the state's
  // tensor right after op i — op i made the new value or was the old value's last reader,
  // whichever is later. Holding every new value to the step's end, as the executor first did,
  // kept two copies of the parameters and optimizer states at the end of each step. Updates
  // whose new value is an argument or a collective's result, whose old value is fetched, or
  // whose point is not an optimizer op, are installed at the end.
  std::vector<std::vector<size_t>> install_after;
  // Peak of live intermediate bytes under this plan, counting every result as its own buffer
  // (views such as reshape, and results that are an operand — ir::AliasedOperand — share
  // storage at run time, so the measured peak can be lower).
  int64_t estimated_peak_bytes = 0;
};

// `keep` lists extra value ids that must survive the run (fetches).
MemoryPlan PlanMemory(const ir::Program& program, const std::vector<int64_t>& keep);

}  // namespace pdist::exec
