#include "passes/repeated_pieces.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "ir/attribute.h"

namespace pdist::passes {

using ir::Operation;
using ir::Value;

std::string PieceSignature(const std::vector<const Operation*>& ops, size_t begin, size_t end) {
  std::unordered_map<const Value*, std::string> local;
  std::string sig;
  auto operand = [&](const Value* v) -> std::string {
    if (v == nullptr) return "_";
    if (auto it = local.find(v); it != local.end()) return it->second;
    if (v->is_argument()) return absl::StrCat("arg ", ir::ValueRoleName(v->role()), " ", v->type().ToString());
    return absl::StrCat("outer ", v->type().ToString());
  };
  int64_t emitted = 0;  // ops in the signature: results are numbered by them, not by position
  for (size_t i = begin; i < end; ++i) {
    const Operation& op = *ops[i];
    if (op.type() == "reshard" && op.num_operands() == 1 && op.num_results() == 1) {
      // A reshard moves a value and computes nothing: where a pipeline stage boundary falls
      // inside one layer and not the next, the two still compute the same.
      local[op.result(0)] = operand(op.operand(0));
      continue;
    }
    absl::StrAppend(&sig, op.type(), "(");
    for (const Value* v : op.operands()) absl::StrAppend(&sig, operand(v), ",");
    absl::StrAppend(&sig, "){");
    for (const auto& [name, attr] : op.attrs()) {
      if (name != "seed") absl::StrAppend(&sig, name, "=", ir::AttributeToString(attr), ",");
    }
    absl::StrAppend(&sig, "}->");
    for (size_t r = 0; r < op.num_results(); ++r) {
      local[op.result(r)] = absl::StrCat("%", emitted, ".", r);
      absl::StrAppend(&sig, op.result(r)->type().ToString(), ",");
    }
    absl::StrAppend(&sig, ";");
    ++emitted;
  }
  return sig;
}

Pieces CutIntoPieces(const std::vector<const Operation*>& ops, const std::vector<size_t>& cuts) {
  Pieces p;
  p.begin.push_back(0);
  p.begin.insert(p.begin.end(), cuts.begin(), cuts.end());
  std::map<std::string, int64_t> ids;
  p.ops_before.push_back(0);
  for (size_t i = 0; i < p.begin.size(); ++i) {
    const size_t end = i + 1 < p.begin.size() ? p.begin[i + 1] : ops.size();
    p.id.push_back(ids.emplace(PieceSignature(ops, p.begin[i], end), static_cast<int64_t>(ids.size())).first->second);
    p.ops_before.push_back(static_cast<int64_t>(end));
  }
  return p;
}

Repetition LongestRepetition(const Pieces& p) {
  const size_t m = p.id.size();
  Repetition best;
  for (size_t period = 1; 2 * period <= m; ++period) {
    // Runs of pieces equal to the one `period` later: a run of r from a gives r / period + 1 copies.
    size_t a = 0;
    while (a + period < m) {
      size_t r = 0;
      while (a + r + period < m && p.id[a + r] == p.id[a + r + period]) ++r;
      const size_t copies = r / period + 1;
      if (copies >= 2) {
        const int64_t covered = p.ops_before[a + copies * period] - p.ops_before[a];
        if (covered > best.ops_covered) best = {a, period, copies, covered};
      }
      a += std::max<size_t>(r, 1);
    }
  }
  return best;
}

}  // namespace pdist::passes
