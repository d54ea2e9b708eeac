#include "planner/search.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ir/status.h"

namespace pdist::planner {
namespace {

constexpr int64_t kMaxVppDegree = 8;
constexpr size_t kTooBigKept = 16;

// The values a choice takes: the fixed one, or all of `all`.
template <typename T>
std::vector<T> Choices(const std::optional<T>& fixed, std::vector<T> all) {
  if (fixed) return {*fixed};
  return all;
}

struct Schedule {
  passes::ScheduleMode mode;
  int64_t vpp;
};

std::vector<Schedule> SchedulesFor(int64_t pp, int64_t micro_batches, int64_t layers, const FixedChoices& fixed) {
  std::vector<Schedule> out;
  if (pp == 1) {
    const passes::ScheduleMode mode = fixed.schedule.value_or(passes::ScheduleMode::k1F1B);
    if (mode == passes::ScheduleMode::kVPP) return out;
    out.push_back({mode, 1});
    return out;
  }
  for (passes::ScheduleMode mode : Choices<passes::ScheduleMode>(
           fixed.schedule, {passes::ScheduleMode::k1F1B, passes::ScheduleMode::kZBH1, passes::ScheduleMode::kVPP})) {
    if (mode != passes::ScheduleMode::kVPP) {
      if (!fixed.vpp || *fixed.vpp == 1) out.push_back({mode, 1});
      continue;
    }
    if (micro_batches % pp != 0) continue;
    for (int64_t v = 2; v <= kMaxVppDegree && pp * v <= layers + 2; ++v) {
      if (!fixed.vpp || *fixed.vpp == v) out.push_back({mode, v});
    }
  }
  return out;
}

std::string Describe(const Candidate& c) { return c.ToString(); }

}  // namespace

std::vector<int64_t> Divisors(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t d = 1; d <= n; ++d) {
    if (n % d == 0) out.push_back(d);
  }
  return out;
}

absl::StatusOr<SearchResult> Search(const PlannedModel& model, const strategy::Cluster& cluster,
                                    const SearchOptions& options) {
  const auto started = std::chrono::steady_clock::now();
  const FixedChoices& fixed = options.fixed;
  const int64_t n = cluster.num_devices(), batch = model.global_batch;
  for (const auto& [name, value] : {std::pair{"dp_degree", fixed.dp}, {"mp_degree", fixed.mp}, {"pp_degree", fixed.pp}}) {
    if (value && (*value < 1 || n % *value != 0)) {
      return absl::InvalidArgumentError(absl::StrCat(name, " ", *value, " does not divide the ", n, " devices of the cluster"));
    }
  }
  Profiler profiler(model, cluster);
  SearchResult result;
  PDIST_ASSIGN_OR_RETURN(result.model_flops_per_step, ModelFlopsPerStep(model, profiler));

  // The (mp, pp) pairs to try; dp follows.
  std::vector<std::pair<int64_t, int64_t>> factorisations;
  for (int64_t mp : Choices<int64_t>(fixed.mp, Divisors(n))) {
    if (!fixed.mp && !options.tensor_parallel_across_nodes && mp > cluster.devices_per_node) continue;
    for (int64_t pp : Choices<int64_t>(fixed.pp, Divisors(n / mp))) {
      if (n % (mp * pp) != 0 || pp > model.layers) continue;
      if (fixed.dp && *fixed.dp != n / (mp * pp)) continue;
      factorisations.push_back({mp, pp});
    }
  }
  if (factorisations.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("no dp × mp × pp factorisation of ", n,
                                                   " devices agrees with the fixed degrees"));
  }

  std::set<std::string> skipped;
  std::optional<Estimate> leanest;  // least memory of any candidate, for the "nothing fits" error
  double best = std::numeric_limits<double>::infinity();
  SearchProgress progress{0, static_cast<int64_t>(factorisations.size()), 0, 0};
  LayoutOutcome* layout = nullptr;  // the factorisation being searched
  auto consider = [&](const Candidate& c) -> absl::StatusOr<bool> {  // true: it fits
    ++result.candidates;
    PDIST_ASSIGN_OR_RETURN(Estimate e, EstimateCandidate(c, model, cluster, profiler, options.estimate,
                                                         best * (1 + options.tie_tolerance)));
    if (!leanest || e.memory.total() < leanest->memory.total()) leanest = e;
    const bool slower = !e.simulated && e.pruned.rfind("slower", 0) == 0;
    if (slower) {
      layout->slower_bound = layout->slower_bound > 0 ? std::min(layout->slower_bound, e.step_time) : e.step_time;
    } else if (!e.fits && (!layout->leanest || e.memory.total() < layout->leanest->memory.total())) {
      layout->leanest = e;
    }
    if (!e.simulated) {
      ++result.pruned;
      if (!slower) result.too_big.push_back(std::move(e));
      return slower;  // more recompute cannot make a slower plan win: end the loop as for a fit
    }
    ++result.simulated;
    if (!e.fits) {
      result.too_big.push_back(e);
      return false;
    }
    if (options.executable_only && !e.not_executable.empty()) return true;
    best = std::min(best, e.step_time);
    if (!layout->best || e.step_time < layout->best->step_time) layout->best = e;
    result.ranked.push_back(std::move(e));
    return true;
  };

  result.layouts.reserve(factorisations.size());
  for (const auto& [mp, pp] : factorisations) {
    const int64_t dp = n / (mp * pp);
    layout = &result.layouts.emplace_back(LayoutOutcome{.dp = dp, .mp = mp, .pp = pp});
    if (batch % dp != 0) {
      layout->not_built = absl::StrCat("dp ", dp, " does not divide the global batch ", batch);
      skipped.insert(absl::StrCat("dp ", dp, ": does not divide the global batch ", batch));
    } else {
      for (int64_t b : Choices<int64_t>(fixed.micro_batch, Divisors(batch / dp))) {
        if (b > options.max_micro_batch && !fixed.micro_batch) continue;
        if ((batch / dp) % b != 0) continue;
        const int64_t m = batch / (dp * b);
        if (fixed.micro_batches && *fixed.micro_batches != m) continue;
        for (bool sp : Choices<bool>(fixed.sp, mp > 1 ? std::vector<bool>{false, true} : std::vector<bool>{false})) {
          if (sp && mp == 1) continue;
          if (absl::StatusOr<const ModelProfile*> p = profiler.Get({mp, sp, b}); !p.ok()) {
            skipped.insert(absl::StrCat("mp ", mp, sp ? " sp" : "", ": ", p.status().message()));
            layout->not_built = std::string(p.status().message());
            continue;
          }
          for (const Schedule& schedule : SchedulesFor(pp, m, model.layers, fixed)) {
            for (int64_t zero : Choices<int64_t>(fixed.zero, dp > 1 ? std::vector<int64_t>{0, 1, 2, 3}
                                                                    : std::vector<int64_t>{0})) {
              bool fits_without_recompute = false;
              for (Recompute rc : Choices<Recompute>(fixed.recompute, {Recompute::kNone, Recompute::kSelective,
                                                                        Recompute::kFull})) {
                const Candidate c{.dp = dp, .mp = mp, .pp = pp, .vpp = schedule.vpp, .sp = sp, .zero = zero,
                                  .micro_batch = b, .micro_batches = m, .schedule = schedule.mode, .recompute = rc};
                PDIST_ASSIGN_OR_RETURN(bool fits, consider(c));
                if (fits) {
                  fits_without_recompute = rc == Recompute::kNone;
                  break;  // more recompute only adds time
                }
              }
              // ZeRO-2 is ZeRO-1's time with less memory, ZeRO-3 slower: once a stage ≥ 1 fits
              // without recompute, the higher ones cannot win.
              if (fits_without_recompute && zero >= 1) break;
            }
          }
        }
      }
    }
    ++progress.factorisations_done;
    progress.priced = result.candidates;
    progress.best_step_time = std::isinf(best) ? 0 : best;
    if (options.progress) options.progress(progress);
  }
  result.skipped.assign(skipped.begin(), skipped.end());
  result.programs_profiled = profiler.programs_profiled();
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  std::sort(result.too_big.begin(), result.too_big.end(),
            [](const Estimate& a, const Estimate& b) { return a.memory.total() < b.memory.total(); });
  if (result.too_big.size() > kTooBigKept) result.too_big.resize(kTooBigKept);
  if (result.ranked.empty()) {
    if (!leanest) {
      return absl::FailedPreconditionError(absl::StrCat("no candidate could be built: ",
                                                        result.skipped.empty() ? "" : result.skipped.front()));
    }
    return absl::FailedPreconditionError(absl::StrFormat(
        "no plan fits in %.1f GB per device (%.1f GB less the %.0f%% margin): the leanest, %s, needs %s%.1f GB",
        cluster.device.memory / 1e9, leanest->capacity / 1e9, options.estimate.memory_margin * 100,
        Describe(leanest->candidate), leanest->simulated ? "" : "at least ", leanest->memory.total() / 1e9));
  }
  std::stable_sort(result.ranked.begin(), result.ranked.end(),
                   [](const Estimate& a, const Estimate& b) { return a.step_time < b.step_time; });
  // Ties to the simpler plan.
  const double limit = result.ranked.front().step_time * (1 + options.tie_tolerance);
  size_t pick = 0;
  for (size_t i = 1; i < result.ranked.size() && result.ranked[i].step_time <= limit; ++i) {
    if (result.ranked[i].candidate.Complexity() < result.ranked[pick].candidate.Complexity()) pick = i;
  }
  std::rotate(result.ranked.begin(), result.ranked.begin() + static_cast<ptrdiff_t>(pick),
              result.ranked.begin() + static_cast<ptrdiff_t>(pick) + 1);
  return result;
}

}  // namespace pdist::planner
