// FindBatchInputs: dim 0 of the data inputs of the highest rank.
#include "passes/batch_inputs.h"

#include <algorithm>
#include <map>

#include "passes/optimizer.h"

namespace pdist::passes {

absl::StatusOr<BatchInputs> FindBatchInputs(const ir::Program& program) {
  std::vector<ir::Value*> data;
  for (ir::Value* arg : program.block().arguments()) {
    if (arg->role() != ir::ValueRole::kDataInput || arg->type().rank() == 0 || arg->name() == kLearningRateFeed) continue;
    data.push_back(arg);
  }
  if (data.empty()) return absl::InvalidArgumentError("the program has no data input with a batch dim");
  const bool all_one = std::all_of(data.begin(), data.end(), [](const ir::Value* v) { return v->type().shape[0] == 1; });
  std::vector<const ir::Value*> candidates;
  for (const ir::Value* v : data) {
    if (all_one || v->type().shape[0] != 1) candidates.push_back(v);
  }
  size_t rank = 0;
  for (const ir::Value* v : candidates) rank = std::max(rank, v->type().shape.size());
  std::map<int64_t, int64_t> count;  // dim 0 → highest-rank candidates with it
  for (const ir::Value* v : candidates) {
    if (v->type().shape.size() == rank) ++count[v->type().shape[0]];
  }
  BatchInputs out;
  int64_t most = 0;
  for (const ir::Value* v : candidates) {  // argument order: the first of the most shared wins
    if (v->type().shape.size() != rank) continue;
    const int64_t n = count[v->type().shape[0]];
    if (n > most) {
      most = n;
      out.batch = v->type().shape[0];
    }
  }
  for (ir::Value* v : data) {
    if (v->type().shape[0] == out.batch) out.inputs.push_back(v);
  }
  return out;
}

}  // namespace pdist::passes
