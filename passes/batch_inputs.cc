// FindBatchInputs: the dim 0 most data inputs share.
#include "passes/batch_inputs.h"

#include <map>

#include "passes/optimizer.h"

namespace pdist::passes {

absl::StatusOr<BatchInputs> FindBatchInputs(const ir::Program& program) {
  std::vector<ir::Value*> data;
  std::map<int64_t, int64_t> count;  // dim 0 → inputs with it
  for (ir::Value* arg : program.block().arguments()) {
    if (arg->role() != ir::ValueRole::kDataInput || arg->type().rank() == 0 || arg->name() == kLearningRateFeed) continue;
    data.push_back(arg);
    ++count[arg->type().shape[0]];
  }
  if (data.empty()) return absl::InvalidArgumentError("the program has no data input with a batch dim");
  BatchInputs out;
  int64_t most = 0;
  for (const ir::Value* v : data) {  // argument order: the first of the most shared wins
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
