// The host side of the embedding kernels on every backend: the ids checked against the
// vocabulary, and the positions grouped by id for a deterministic scatter-add (each vocabulary
// row sums its positions in increasing order).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "executor/tensor.h"

namespace pdist::exec {

// Every id (an i32 or i64 host tensor) indexes a row of a `vocab`-row table; the error names the
// first offender and `what` it is.
absl::Status CheckIds(const Tensor& ids, int64_t vocab, const char* what);

// Positions grouped by id with a stable counting sort: row v's positions are
// order[start[v] .. start[v+1]), increasing. `ids` checked already.
struct IdGroups {
  std::vector<int64_t> start;  // vocab + 1
  std::vector<int64_t> order;  // one per id
};
IdGroups GroupIds(const Tensor& ids, int64_t vocab);

}  // namespace pdist::exec
