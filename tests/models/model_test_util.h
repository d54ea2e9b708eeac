// Helpers shared by the model tests: find ops and parameters in a built program.
#pragma once

#include <string>
#include <vector>

#include "ir/program.h"

namespace pdist::ir::models::testing {

inline std::vector<std::string> ParameterNames(const Program& program) {
  std::vector<std::string> names;
  for (const Value* p : program.Parameters()) names.push_back(p->name());
  return names;
}

// The first op of `type`, or nullptr.
inline const Operation* FindOp(const Program& program, const std::string& type) {
  for (const auto& op : program.block().ops()) {
    if (op->type() == type) return op.get();
  }
  return nullptr;
}

inline int CountOps(const Program& program, const std::string& type) {
  int n = 0;
  for (const auto& op : program.block().ops()) n += op->type() == type ? 1 : 0;
  return n;
}

// The logits: operand 0 of the cross_entropy_with_softmax op.
inline const Value* Logits(const Program& program) {
  const Operation* ce = FindOp(program, "cross_entropy_with_softmax");
  return ce ? ce->operand(0) : nullptr;
}

}  // namespace pdist::ir::models::testing
