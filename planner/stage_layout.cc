#include "planner/stage_layout.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"

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

}  // namespace

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

absl::StatusOr<StageLayout> LayoutStages(const ModelProfile& profile, const PlannedModel& model, int64_t virtual_stages) {
  const int64_t segments = static_cast<int64_t>(model.segments.size());
  if (virtual_stages < 1 || virtual_stages > segments) {
    return absl::InvalidArgumentError(absl::StrCat(virtual_stages, " virtual pipeline stages for a model of ", segments,
                                                   " segments (", model.description, "): at most one stage per segment"));
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
