// Who reads each value of a program: the (op, operand index) pairs in program order. The
// rewriting passes ask it before they change anything (fuse-optimizer, fuse-gemm-epilogue).
#pragma once

#include <cstddef>
#include <unordered_map>
#include <vector>

#include "ir/program.h"

namespace pdist::passes {

struct Use {
  ir::Operation* op;
  size_t operand;
};
using Uses = std::unordered_map<const ir::Value*, std::vector<Use>>;

inline Uses UsesOf(const ir::Program& program) {
  Uses uses;
  for (const auto& op : program.block().ops()) {
    for (size_t i = 0; i < op->num_operands(); ++i) {
      if (op->operand(i) != nullptr) uses[op->operand(i)].push_back({op.get(), i});
    }
  }
  return uses;
}

}  // namespace pdist::passes
