#include "planner/stage_layout.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/status.h"
#include "passes/pipeline_stages.h"

namespace pdist::planner {
namespace {

// First indices of the groups a greedy left-to-right fill makes with sums ≤ limit.
std::vector<int64_t> GreedyGroups(const std::vector<double>& weights, double limit) {
  std::vector<int64_t> starts{0};
  double sum = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (sum + weights[i] > limit && sum > 0) {
      starts.push_back(static_cast<int64_t>(i));
      sum = 0;
    }
    sum += weights[i];
  }
  return starts;
}

double TimeOf(const SegmentCost& s) {
  return s.Seconds(ir::OpRole::kForward) + s.Seconds(ir::OpRole::kBackward) + s.Seconds(ir::OpRole::kBackwardWeight);
}

// "'gpt.h.1.*', 'gpt.h.2.*', 'gpt.h.3.*', … 'gpt.ln_f.*' (25 in all)": where a cut can go.
std::string CutPoints(const PlannedModel& model) {
  std::vector<std::string> quoted;
  for (size_t i = 1; i < model.segments.size(); ++i) quoted.push_back(absl::StrCat("'", model.segments[i].mark, "'"));
  if (quoted.size() <= 6) return absl::StrJoin(quoted, ", ");
  return absl::StrCat(absl::StrJoin(quoted.begin(), quoted.begin() + 3, ", "), ", … ",
                      absl::StrJoin(quoted.end() - 2, quoted.end(), ", "), " (", quoted.size(), " in all)");
}

// The op each virtual stage after the first starts at, when `forward` is cut at `marks`.
absl::StatusOr<std::vector<int64_t>> StartOps(const ir::Program& forward, const std::vector<std::string>& marks) {
  PDIST_ASSIGN_OR_RETURN(const std::vector<int64_t> stage_of, passes::StagesFromMarks(forward, marks));
  std::vector<int64_t> starts(marks.size(), -1);
  for (size_t i = 0; i < stage_of.size(); ++i) {
    if (stage_of[i] > 0 && starts[static_cast<size_t>(stage_of[i] - 1)] < 0) {
      starts[static_cast<size_t>(stage_of[i] - 1)] = static_cast<int64_t>(i);
    }
  }
  return starts;
}

}  // namespace

absl::StatusOr<StageCut> StageCutFromMarks(const PlannedModel& model, std::vector<std::string> marks) {
  StageCut cut;
  if (model.forward != nullptr) {
    // Where the engine would start each stage, against where each segment starts.
    std::vector<std::string> segment_marks;
    for (size_t i = 1; i < model.segments.size(); ++i) segment_marks.push_back(model.segments[i].mark);
    PDIST_ASSIGN_OR_RETURN(const std::vector<int64_t> segment_starts, StartOps(*model.forward, segment_marks));
    PDIST_ASSIGN_OR_RETURN(const std::vector<int64_t> given, StartOps(*model.forward, marks));
    for (size_t k = 0; k < marks.size(); ++k) {
      const auto at = std::find(segment_starts.begin(), segment_starts.end(), given[k]);
      if (at == segment_starts.end()) {
        // The segment it falls in: the last to start before it (the first segment has no mark).
        const auto next = std::upper_bound(segment_starts.begin(), segment_starts.end(), given[k]);
        const std::string from = next == segment_starts.begin()
                                     ? std::string("the program's start")
                                     : absl::StrCat("'", model.segments[next - segment_starts.begin()].mark, "' (op #",
                                                    *(next - 1), ")");
        const std::string to = next == segment_starts.end()
                                   ? std::string("the end")
                                   : absl::StrCat("'", model.segments[next - segment_starts.begin() + 1].mark,
                                                  "' (op #", *next, ")");
        return absl::InvalidArgumentError(absl::StrCat(
            "pipeline.split_before[", k, "] '", marks[k], "' starts a stage at op #", given[k],
            ", inside the segment from ", from, " to ", to, ": the planner prices whole segments, cut at ",
            CutPoints(model)));
      }
      cut.starts.push_back(at - segment_starts.begin() + 1);
    }
  } else {
    for (size_t k = 0; k < marks.size(); ++k) {
      int64_t found = -1;
      for (size_t i = 1; i < model.segments.size() && found < 0; ++i) {
        if (model.segments[i].mark == marks[k]) found = static_cast<int64_t>(i);
      }
      const std::string key = absl::StrCat("pipeline.split_before[", k, "] '", marks[k], "'");
      if (found < 0) {
        return absl::InvalidArgumentError(absl::StrCat(key, " is not where a segment of ", model.description,
                                                       " starts: the planner cuts at ", CutPoints(model)));
      }
      if (!cut.starts.empty() && found <= cut.starts.back()) {
        return absl::InvalidArgumentError(absl::StrCat(key, " does not start after the previous stage's '",
                                                       marks[k - 1], "': list the stages in program order"));
      }
      cut.starts.push_back(found);
    }
  }
  cut.marks = std::move(marks);
  return cut;
}

std::vector<int64_t> BalancedGroups(const std::vector<double>& weights, int64_t groups) {
  const int64_t n = static_cast<int64_t>(weights.size());
  double lo = *std::max_element(weights.begin(), weights.end());
  double hi = std::accumulate(weights.begin(), weights.end(), 0.0);
  // Bisect on the largest group sum: the greedy fill is optimal for a given limit.
  for (int i = 0; i < 60 && hi - lo > 1e-12 * hi; ++i) {
    const double mid = (lo + hi) / 2;
    if (static_cast<int64_t>(GreedyGroups(weights, mid).size()) <= groups) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  std::vector<int64_t> starts = GreedyGroups(weights, hi);
  // Fewer groups than asked: split the longest (splitting never raises the largest sum).
  while (static_cast<int64_t>(starts.size()) < groups) {
    int64_t best = -1, best_len = 1;
    for (size_t g = 0; g < starts.size(); ++g) {
      const int64_t end = g + 1 < starts.size() ? starts[g + 1] : n;
      if (end - starts[g] > best_len) {
        best_len = end - starts[g];
        best = static_cast<int64_t>(g);
      }
    }
    if (best < 0) break;
    starts.insert(starts.begin() + best + 1, starts[best] + best_len / 2);
  }
  return starts;
}

absl::StatusOr<StageLayout> LayoutStages(const ModelProfile& profile, const PlannedModel& model, int64_t virtual_stages,
                                         const StageCut* cut) {
  const int64_t segments = static_cast<int64_t>(model.segments.size());
  if (virtual_stages < 1 || virtual_stages > segments) {
    return absl::InvalidArgumentError(absl::StrCat(virtual_stages, " virtual pipeline stages for a model of ", segments,
                                                   " segments (", model.description, "): at most one stage per segment"));
  }
  if (cut != nullptr) {
    if (static_cast<int64_t>(cut->starts.size()) + 1 != virtual_stages) {
      return absl::InvalidArgumentError(absl::StrCat("pipeline.split_before has ", cut->marks.size(), " marks: ",
                                                     cut->marks.size() + 1, " virtual stages, not ", virtual_stages));
    }
    StageLayout layout{.split_before = cut->marks};
    for (size_t g = 0; g <= cut->starts.size(); ++g) {
      layout.stages.push_back({g == 0 ? 0 : cut->starts[g - 1], g < cut->starts.size() ? cut->starts[g] : segments});
    }
    return layout;
  }
  std::vector<double> weights;
  for (const ProgramSegment& s : model.segments) weights.push_back(TimeOf(profile.Of(s)));
  const std::vector<int64_t> starts = BalancedGroups(weights, virtual_stages);
  StageLayout layout;
  for (size_t g = 0; g < starts.size(); ++g) {
    layout.stages.push_back({starts[g], g + 1 < starts.size() ? starts[g + 1] : segments});
    if (g > 0) layout.split_before.push_back(model.segments[static_cast<size_t>(starts[g])].mark);
  }
  return layout;
}

}  // namespace pdist::planner
