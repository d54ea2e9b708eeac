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

}  // namespace pdist::testing
