// Helpers for tests of DistAttrs and the completion pass: short printable summaries and the
// reshard ops of a program.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ir/dist/dist_attr.h"
#include "ir/program.h"

namespace pdist::testing {

// "[0,-1]", "[-1,-1] {1: sum}", "none"; the mesh is left out (tests on one mesh).
inline std::string Dist(const ir::Value* v) {
  if (v == nullptr || !v->dist_attr()) return "none";
  const ir::DistAttr& a = *v->dist_attr();
  std::string out = ir::DimsMappingToString(a.dims_mapping);
  if (!a.partial.empty()) absl::StrAppend(&out, " ", ir::PartialDimsToString(a.partial));
  return out;
}

// The reshard ops of `program`, in op order.
inline std::vector<const ir::Operation*> ReshardOps(const ir::Program& program) {
  std::vector<const ir::Operation*> out;
  for (const auto& op : program.block().ops()) {
    if (op->type() == "reshard") out.push_back(op.get());
  }
  return out;
}

// "[-1,-1] {0: sum} -> [-1,-1]": a reshard's source and target.
inline std::string ReshardSummary(const ir::Operation& reshard) {
  return absl::StrCat(Dist(reshard.operand(0)), " -> ", Dist(reshard.result(0)));
}

// "<first consumer>#<operand>: <source> -> <target>" for every reshard, in program order;
// reshards whose first consumer's type starts with `skip_consumer` (when given) are left out.
inline std::vector<std::string> ReshardLog(const ir::Program& program, const std::string& skip_consumer = "") {
  std::vector<std::string> log;
  const auto& ops = program.block().ops();
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i]->type() != "reshard") continue;
    std::string consumer = "?";
    for (size_t j = i + 1; j < ops.size() && consumer == "?"; ++j) {
      for (size_t k = 0; k < ops[j]->num_operands(); ++k) {
        if (ops[j]->operand(k) == ops[i]->result(0)) consumer = absl::StrCat(ops[j]->type(), "#", k);
      }
    }
    if (!skip_consumer.empty() && consumer.rfind(skip_consumer, 0) == 0) continue;
    log.push_back(absl::StrCat(consumer, ": ", ReshardSummary(*ops[i])));
  }
  return log;
}

}  // namespace pdist::testing
