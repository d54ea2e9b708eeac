#include "planner/program_segments.h"

#include <algorithm>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "ir/status.h"
#include "passes/pipeline_stages.h"
#include "passes/repeated_pieces.h"
#include "planner/stage_layout.h"

namespace pdist::planner {
namespace {

using ir::Operation;
using ir::Value;
using passes::CutIntoPieces;
using passes::LongestRepetition;
using passes::Pieces;
using passes::Repetition;

// Crossing levels tried, lowest first: the residual stream alone, then with a mask or a rotary
// table beside it, and so on.
constexpr size_t kLevelsTried = 4;

// For each op, the name of an argument it reads first (a parameter rather than a data input),
// or "" — only such an op can start a pipeline stage (passes/pipeline_stages.h's marks). Names
// with the glob's '*' would match more than themselves and are not used.
std::vector<std::string> FirstReadMarks(const std::vector<std::unique_ptr<Operation>>& ops) {
  std::vector<std::string> marks(ops.size());
  std::unordered_set<const Value*> seen;
  for (size_t i = 0; i < ops.size(); ++i) {
    bool parameter = false;
    for (const Value* v : ops[i]->operands()) {
      if (v == nullptr || !v->is_argument() || !seen.insert(v).second) continue;
      if (v->name().empty() || v->name().find('*') != std::string::npos) continue;
      const bool is_parameter = v->role() == ir::ValueRole::kParameter;
      if (marks[i].empty() || (is_parameter && !parameter)) {
        marks[i] = v->name();
        parameter = is_parameter;
      }
    }
  }
  return marks;
}

std::string Ops(int64_t n) { return absl::StrCat(n, n == 1 ? " op" : " ops"); }

absl::Status CheckMarks(const ir::Program& forward, const ProgramSegments& out) {
  std::vector<std::string> marks;
  for (size_t i = 1; i < out.segments.size(); ++i) marks.push_back(out.segments[i].mark);
  PDIST_ASSIGN_OR_RETURN(std::vector<int64_t> stage_of, passes::StagesFromMarks(forward, marks));
  // A stage may start a few argument-free ops before its mark's reader (passes/pipeline_stages.h),
  // never before the previous segment's.
  for (size_t i = 1; i < out.segments.size(); ++i) {
    const size_t first = static_cast<size_t>(out.segments[i].first_op);
    const size_t previous = static_cast<size_t>(out.segments[i - 1].first_op);
    if (stage_of[first] != static_cast<int64_t>(i) || stage_of[previous] != static_cast<int64_t>(i - 1)) {
      return absl::InternalError(absl::StrCat("segment ", i, " starts at op #", first, " but its mark '",
                                              out.segments[i].mark, "' starts a stage elsewhere"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ProgramSegments> FindProgramSegments(const ir::Program& forward, int64_t max_segments) {
  const auto& ops = forward.block().ops();
  if (ops.empty()) return absl::InvalidArgumentError("the program has no ops to plan");
  std::vector<const Operation*> op_list;
  for (const auto& op : ops) op_list.push_back(op.get());
  if (max_segments < 1) return absl::InvalidArgumentError(absl::StrCat("max_segments must be >= 1, got ", max_segments));
  const std::vector<std::string> marks = FirstReadMarks(ops);
  const std::vector<int64_t> crossing = passes::CrossingValues(forward);
  std::vector<int64_t> levels;
  for (size_t c = 1; c < ops.size(); ++c) {
    if (!marks[c].empty()) levels.push_back(crossing[c]);
  }
  std::sort(levels.begin(), levels.end());
  levels.erase(std::unique(levels.begin(), levels.end()), levels.end());
  if (levels.size() > kLevelsTried) levels.resize(kLevelsTried);

  auto cuts_at = [&](int64_t bound) {
    std::vector<size_t> cuts;
    for (size_t c = 1; c < ops.size(); ++c) {
      if (!marks[c].empty() && crossing[c] <= bound) cuts.push_back(c);
    }
    return cuts;
  };
  Pieces best_pieces = CutIntoPieces(op_list, levels.empty() ? std::vector<size_t>{} : cuts_at(levels.front()));
  Repetition best = LongestRepetition(best_pieces);
  for (size_t l = 1; l < levels.size(); ++l) {
    Pieces pieces = CutIntoPieces(op_list, cuts_at(levels[l]));
    Repetition r = LongestRepetition(pieces);
    if (r.ops_covered > best.ops_covered) {
      best = r;
      best_pieces = std::move(pieces);
    }
  }

  ProgramSegments out;
  const Pieces& p = best_pieces;
  auto add = [&](size_t piece, bool layer, int64_t kind) {
    out.segments.push_back({.first_op = static_cast<int64_t>(p.begin[piece]), .kind = kind,
                            .mark = piece == 0 ? "" : marks[p.begin[piece]], .layer = layer});
  };
  if (best.copies >= 2) {
    const size_t end = best.start + best.copies * best.period;
    if (best.start > 0) add(0, false, out.kinds++);
    const int64_t layer_kind = out.kinds++;
    for (size_t k = 0; k < best.copies; ++k) add(best.start + k * best.period, true, layer_kind);
    if (end < p.id.size()) add(end, false, out.kinds++);
    out.layers = static_cast<int64_t>(best.copies);
    const int64_t after = static_cast<int64_t>(ops.size()) - p.ops_before[end];
    out.summary = absl::StrCat(out.layers, " repeated layers of ", Ops(best.ops_covered / out.layers), "; ",
                               Ops(p.ops_before[best.start]), " before, ", Ops(after), " after");
  } else {
    // Nothing repeats: every piece its own segment, merged to at most max_segments by FLOPs.
    std::vector<double> weights;
    for (size_t i = 0; i < p.begin.size(); ++i) {
      double w = 0;
      for (int64_t op = p.ops_before[i]; op < p.ops_before[i + 1]; ++op) w += passes::ForwardFlops(*ops[op]) + 1;
      weights.push_back(w);
    }
    std::vector<int64_t> groups;
    if (static_cast<int64_t>(weights.size()) > max_segments) {
      groups = BalancedGroups(weights, max_segments);
    } else {
      for (size_t i = 0; i < weights.size(); ++i) groups.push_back(static_cast<int64_t>(i));
    }
    for (int64_t g : groups) add(static_cast<size_t>(g), true, out.kinds++);
    out.summary = absl::StrCat("no repeated layers; ", out.segments.size(), " segments between cut points");
  }
  PDIST_RETURN_IF_ERROR(CheckMarks(forward, out));
  return out;
}

}  // namespace pdist::planner
