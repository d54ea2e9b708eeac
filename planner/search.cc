#include "planner/search.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "ir/status.h"
#include "passes/schedules/schedule_def.h"

namespace pdist::planner {
namespace {

constexpr int64_t kMaxVppDegree = 8;
constexpr size_t kTooBigKept = 16;
// Candidates priced whole to name the leanest when nothing fits (each a schedule simulation).
constexpr int kLeanestRepriced = 64;

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

// The schedules to try on pp stages; where a fixed choice rules every one out, why goes to
// `skipped` (so that "no candidate could be built" names it).
std::vector<Schedule> SchedulesFor(int64_t pp, int64_t micro_batches, int64_t segments, const FixedChoices& fixed,
                                   std::set<std::string>& skipped) {
  std::vector<Schedule> out;
  if (pp == 1) {
    const passes::ScheduleMode mode = fixed.schedule.value_or(passes::ScheduleMode::k1F1B);
    if (passes::ScheduleDefOf(mode).interleaves_chunks) {
      skipped.insert(absl::StrCat("pp 1: an interleaved schedule needs pipeline stages (pp > 1)"));
      return out;
    }
    if (fixed.vpp && *fixed.vpp > 1) {  // chunks of stages there are none of: not dropped silently
      skipped.insert(absl::StrCat("pp 1: vpp ", *fixed.vpp, " interleaves chunks of pipeline stages (pp > 1)"));
      return out;
    }
    out.push_back({mode, 1});
    return out;
  }
  // FThenB is not searched: 1F1B has its bubble with less memory.
  for (passes::ScheduleMode mode : Choices<passes::ScheduleMode>(
           fixed.schedule, {passes::ScheduleMode::k1F1B, passes::ScheduleMode::kZBH1, passes::ScheduleMode::kVPP})) {
    if (!passes::ScheduleDefOf(mode).interleaves_chunks) {
      if (!fixed.vpp || *fixed.vpp == 1) {
        out.push_back({mode, 1});
      } else if (fixed.schedule) {
        skipped.insert(absl::StrCat("vpp ", *fixed.vpp, ": ", passes::ScheduleModeName(mode),
                                    " runs one model chunk per stage (VPP interleaves several)"));
      }
      continue;
    }
    if (fixed.vpp && *fixed.vpp < 2) {
      skipped.insert(absl::StrCat("vpp ", *fixed.vpp, ": ", passes::ScheduleModeName(mode),
                                  " interleaves at least 2 model chunks per stage"));
      continue;
    }
    // Searched up to kMaxVppDegree; a fixed degree is tried whatever it is. A degree's reason
    // is filed where vpp is fixed, or, where only the schedule is, the first one when no degree
    // fits (the search said "no candidate could be built" and nothing more).
    const size_t before = out.size();
    std::string first_reason;
    for (int64_t v = fixed.vpp ? *fixed.vpp : 2; v <= (fixed.vpp ? *fixed.vpp : kMaxVppDegree); ++v) {
      std::string reason;
      const bool too_many_chunks = pp * v > segments;
      if (too_many_chunks) {
        reason = absl::StrCat("pp ", pp, " vpp ", v, ": ", pp * v, " model chunks, but the model cuts into ", segments,
                              " segments (its repeated layers, or the pieces between cut points); the planner prices "
                              "cuts between segments only, where pdist-train may also cut inside a layer");
      } else if (const absl::Status shape = passes::CheckScheduleShape(mode, {pp, micro_batches, v}); !shape.ok()) {
        reason = absl::StrCat("pp ", pp, " vpp ", v, " with ", micro_batches, " micro-batches: ", shape.message());
      } else {
        out.push_back({mode, v});
      }
      if (!reason.empty() && fixed.vpp) skipped.insert(reason);
      if (first_reason.empty()) first_reason = reason;
      if (too_many_chunks) break;
    }
    if (out.size() == before && fixed.schedule && !fixed.vpp && !first_reason.empty()) {
      skipped.insert(absl::StrCat(first_reason, " (", passes::ScheduleModeName(mode),
                                  " interleaves at least 2 model chunks per stage)"));
    }
  }
  return out;
}

}  // namespace

std::vector<int64_t> Divisors(int64_t n) {
  std::vector<int64_t> low, high;  // d and n / d for d up to √n: a batch of 2^20 took seconds
  for (int64_t d = 1; d <= n / d; ++d) {
    if (n % d != 0) continue;
    low.push_back(d);
    if (d != n / d) high.push_back(n / d);
  }
  low.insert(low.end(), high.rbegin(), high.rend());
  return low;
}

std::vector<int64_t> ZeroDegreeChoices(const Candidate& c, const strategy::Cluster& cluster, const FixedChoices& fixed) {
  if (c.zero == 0) return {0};
  if (fixed.zero_degree) {
    if (c.dp % *fixed.zero_degree != 0) return {};
    return {*fixed.zero_degree == c.dp ? 0 : *fixed.zero_degree};
  }
  std::vector<int64_t> out = {0};
  // Consecutive data-parallel ranks are mp devices apart (DeviceOf): a node holds this many,
  // when mp divides it (otherwise a group would straddle nodes).
  if (cluster.devices_per_node % c.mp != 0) return out;
  const int64_t per_node = cluster.devices_per_node / c.mp;
  if (per_node > 1 && per_node < c.dp && c.dp % per_node == 0) out.push_back(per_node);
  return out;
}

namespace {

// One search: the state the candidates update as they are priced, and its steps.
class SearchRun {
 public:
  SearchRun(const PlannedModel& model, const strategy::Cluster& cluster, const SearchOptions& options)
      : model_(model), cluster_(cluster), options_(options), fixed_(options.fixed), estimate_(options.estimate),
        profiler_(model, cluster) {}

  absl::StatusOr<SearchResult> Run() {
    const auto started = std::chrono::steady_clock::now();
    if (!fixed_.split_before.empty()) {
      PDIST_ASSIGN_OR_RETURN(estimate_.stage_cut, StageCutFromMarks(model_, fixed_.split_before));
    }
    PDIST_ASSIGN_OR_RETURN(const auto factorisations, Factorisations());
    PDIST_ASSIGN_OR_RETURN(result_.model_flops_per_step, ModelFlopsPerStep(model_, profiler_));
    SearchProgress progress{0, static_cast<int64_t>(factorisations.size()), 0, 0};
    result_.layouts.reserve(factorisations.size());
    for (const auto& [mp, pp] : factorisations) {
      LayoutOutcome& layout =
          result_.layouts.emplace_back(LayoutOutcome{.dp = cluster_.num_devices() / (mp * pp), .mp = mp, .pp = pp});
      PDIST_RETURN_IF_ERROR(SearchLayout(layout));
      ++progress.factorisations_done;
      progress.priced = result_.candidates;
      progress.best_step_time = std::isinf(best_) ? 0 : best_;
      if (options_.progress) options_.progress(progress);
    }
    result_.skipped.assign(skipped_.begin(), skipped_.end());
    result_.programs_profiled = profiler_.programs_profiled();
    result_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    return Finish();
  }

 private:
  // The (mp, pp) pairs to try (dp follows), tensor parallel inside a node unless allowed across.
  absl::StatusOr<std::vector<std::pair<int64_t, int64_t>>> Factorisations() {
    const int64_t n = cluster_.num_devices();
    for (const auto& [name, value] :
         {std::pair{"dp_degree", fixed_.dp}, {"mp_degree", fixed_.mp}, {"pp_degree", fixed_.pp}}) {
      if (value && (*value < 1 || n % *value != 0)) {
        return absl::InvalidArgumentError(absl::StrCat(name, " ", *value, " does not divide the ", n, " devices of the cluster"));
      }
    }
    std::vector<std::pair<int64_t, int64_t>> out;
    for (int64_t mp : Choices<int64_t>(fixed_.mp, Divisors(n))) {
      if (!fixed_.mp && !options_.tensor_parallel_across_nodes && mp > cluster_.devices_per_node) continue;
      for (int64_t pp : Choices<int64_t>(fixed_.pp, Divisors(n / mp))) {
        if (n % (mp * pp) != 0) continue;
        if (fixed_.dp && *fixed_.dp != n / (mp * pp)) continue;
        if (estimate_.stage_cut && (pp == 1 || CutStages() % pp != 0)) continue;
        if (pp > static_cast<int64_t>(model_.segments.size())) {
          skipped_.insert(absl::StrCat("pp ", pp, ": more stages than the model's ", model_.segments.size(),
                                       " segments"));
          continue;
        }
        out.push_back({mp, pp});
      }
    }
    if (out.empty()) {
      const auto segments = static_cast<int64_t>(model_.segments.size());
      std::string why;
      if (fixed_.pp && *fixed_.pp > segments) {
        why = absl::StrCat(": pp_degree ", *fixed_.pp, " is more stages than the model's ", segments,
                           " segments (its repeated layers, or the pieces between cut points)");
      } else if (estimate_.stage_cut) {
        why = absl::StrCat(": pipeline.split_before makes ", CutStages(),
                           " virtual stages, which need a pp_degree above 1 that divides them");
      }
      return absl::InvalidArgumentError(
          absl::StrCat("no dp × mp × pp factorisation of ", n, " devices agrees with the fixed degrees", why));
    }
    return out;
  }

  // Whether every reason nothing was built is a degree the model's sizes do not divide (the
  // batch, heads or vocabulary, its segments), not a contradiction among fixed choices: then
  // another device count is the way out.
  bool OnlyTheDeviceCountStandsInTheWay() const {
    return !result_.skipped.empty() &&
           std::all_of(result_.skipped.begin(), result_.skipped.end(), [](const std::string& reason) {
             return absl::StrContains(reason, "does not divide the global batch") ||
                    absl::StrContains(reason, "is not divisible by mp_degree") ||
                    absl::StrContains(reason, "more stages than the model's");
           });
  }

  // The virtual stages a fixed cut makes (pp × vpp).
  int64_t CutStages() const { return static_cast<int64_t>(estimate_.stage_cut->starts.size()) + 1; }

  // The fixed choices on `pp` stages: a fixed cut fixes vpp too. Nullopt, with the reason filed,
  // when it contradicts a fixed vpp.
  std::optional<FixedChoices> FixedOnStages(int64_t pp) {
    FixedChoices fixed = fixed_;
    if (!estimate_.stage_cut) return fixed;
    const int64_t vpp = CutStages() / pp;
    if (fixed.vpp && *fixed.vpp != vpp) {
      skipped_.insert(absl::StrCat("pp ", pp, ": pipeline.split_before makes ", CutStages(), " virtual stages, ", vpp,
                                   " per stage, not vpp_degree ", *fixed.vpp));
      return std::nullopt;
    }
    fixed.vpp = vpp;
    return fixed;
  }

  // Every micro-batching, sp and schedule of one dp × mp × pp layout.
  absl::Status SearchLayout(LayoutOutcome& layout) {
    const int64_t batch = model_.global_batch, dp = layout.dp, mp = layout.mp;
    if (batch % dp != 0) {
      layout.not_built = absl::StrCat("dp ", dp, " does not divide the global batch ", batch);
      skipped_.insert(absl::StrCat("dp ", dp, ": does not divide the global batch ", batch));
      return absl::OkStatus();
    }
    if (fixed_.micro_batch && (batch / dp) % *fixed_.micro_batch != 0) {
      skipped_.insert(absl::StrCat("dp ", dp, ": micro_batch_size ", *fixed_.micro_batch,
                                   " does not divide the batch per replica, ", batch / dp));
    }
    if (fixed_.micro_batches && (batch / dp) % *fixed_.micro_batches != 0) {
      skipped_.insert(absl::StrCat("dp ", dp, ": accumulate_steps ", *fixed_.micro_batches,
                                   " does not divide the batch per replica, ", batch / dp));
    }
    const std::optional<FixedChoices> on_stages = FixedOnStages(layout.pp);
    if (!on_stages) return absl::OkStatus();
    // Reasons a micro-batching was ruled out, filed only where none of this layout's is left.
    std::set<std::string> batching_reasons;
    bool batched = false;
    for (int64_t b : Choices<int64_t>(fixed_.micro_batch, Divisors(batch / dp))) {
      if ((batch / dp) % b != 0) continue;
      const int64_t m = batch / (dp * b);
      if (fixed_.micro_batches && *fixed_.micro_batches != m) {
        if (fixed_.micro_batch) {
          batching_reasons.insert(absl::StrCat("dp ", dp, ": micro_batch_size ", b, " × accumulate_steps ",
                                               *fixed_.micro_batches, " is not the batch per replica, ", batch / dp));
        }
        continue;
      }
      if (b > max_micro_batch_ && !fixed_.micro_batch) {
        batching_reasons.insert(absl::StrCat("dp ", dp, ": micro-batch ", b, " is past the largest tried, ",
                                             max_micro_batch_, " (--max-micro-batch)"));
        continue;
      }
      batched = true;
      for (bool sp : Choices<bool>(fixed_.sp, mp > 1 ? std::vector<bool>{false, true} : std::vector<bool>{false})) {
        if (sp && mp == 1) {
          skipped_.insert("mp 1: sp splits the tensor-parallel group (mp > 1)");
          continue;
        }
        if (absl::StatusOr<const ModelProfile*> p = profiler_.Get({mp, sp, b}); !p.ok()) {
          // One reason per degree: heads that mp does not divide failed every micro-batch, and
          // --explain listed each (nine lines of one cause).
          if (unprofiled_.insert({mp, sp}).second) {
            skipped_.insert(absl::StrCat("mp ", mp, sp ? " sp" : "", ": ", p.status().message()));
          }
          layout.not_built = std::string(p.status().message());
          continue;
        }
        for (const Schedule& schedule : SchedulesFor(layout.pp, m, static_cast<int64_t>(model_.segments.size()), *on_stages, skipped_)) {
          const Candidate base{.dp = dp, .mp = mp, .pp = layout.pp, .vpp = schedule.vpp, .sp = sp,
                               .micro_batch = b, .micro_batches = m, .schedule = schedule.mode};
          PDIST_RETURN_IF_ERROR(SearchMemorySavings(base, layout));
        }
      }
    }
    if (!batched) skipped_.insert(batching_reasons.begin(), batching_reasons.end());
    return absl::OkStatus();
  }

  // ZeRO stages and recompute policies of one candidate, least memory saving first: recompute
  // only adds time, so it stops at the first policy that fits (or that a bound shows slower).
  // Every ZeRO stage is tried: none is slower than another by rule. ZeRO-1 and 2 gather the
  // updated parameters after the step, exposed; ZeRO-3 gathers each segment's ahead of its job,
  // hidden behind compute, and can be the fastest (13B on 64 H100s, micro-batch 2: ZeRO-3 fits
  // at 0.672 s where ZeRO-1's gather alone makes it slower; docs/benchmarks.md).
  absl::Status SearchMemorySavings(const Candidate& base, LayoutOutcome& layout) {
    const bool sharded = (fixed_.zero && *fixed_.zero > 0) || fixed_.sharded.value_or(false);
    if (sharded && base.dp == 1) {
      // A layout without data parallelism has nothing to shard: another layout may.
      skipped_.insert(fixed_.zero ? absl::StrCat("dp 1: ZeRO stage ", *fixed_.zero, " needs dp > 1")
                                  : std::string("dp 1: sharding.enable needs dp > 1"));
      return absl::OkStatus();
    }
    std::vector<int64_t> stages = {0, 1, 2, 3};
    if (base.dp == 1 || fixed_.sharded == false) {
      stages = {0};
    } else if (fixed_.sharded == true) {
      stages = {1, 2, 3};
    }
    for (int64_t zero : Choices<int64_t>(fixed_.zero, stages)) {
      Candidate with_zero = base;
      with_zero.zero = zero;
      const std::vector<int64_t> degrees = ZeroDegreeChoices(with_zero, cluster_, fixed_);
      if (degrees.empty()) {
        skipped_.insert(absl::StrCat("dp ", base.dp, ": sharding.degree ", *fixed_.zero_degree, " does not divide it"));
      }
      for (int64_t degree : degrees) {
        for (bool shards : AccumulateShardsChoices(with_zero)) {
          for (Recompute rc : Choices<Recompute>(fixed_.recompute, RecomputeChoices())) {
            Candidate c = with_zero;
            c.zero_degree = degree;
            c.accumulate_shards = shards;
            c.recompute = rc;
            PDIST_ASSIGN_OR_RETURN(bool done, Consider(c, layout));
            if (done) break;
          }
        }
      }
    }
    return absl::OkStatus();
  }

  // Whole gradients first (one reduce-scatter per step), then accumulated shards (one per
  // micro-batch, a slice of the gradient memory): only ZeRO 2 and 3 with several micro-batches
  // can tell them apart. A strategy file's choice holds wherever it can apply.
  std::vector<bool> AccumulateShardsChoices(const Candidate& c) {
    if (c.zero < 2) {
      if (!fixed_.accumulate_shards.value_or(false)) return {false};
      skipped_.insert(absl::StrCat("ZeRO stage ", c.zero, ": sharding.accumulate_shards needs stage 2 or 3"));
      return {};
    }
    if (fixed_.accumulate_shards) return {*fixed_.accumulate_shards};
    return c.micro_batches > 1 ? std::vector<bool>{false, true} : std::vector<bool>{false};
  }

  // "more devices, ZeRO stage 3, recompute, ... or a smaller --memory-margin", less what is fixed.
  // `leanest` is the plan that needs least: a knob it already turns all the way is no hint.
  std::string KnobsThatLowerMemory(const Candidate& leanest) const {
    std::vector<std::string> knobs = {"more devices"};
    const bool zero_free = !fixed_.zero && fixed_.sharded != false;
    const bool recompute_free = !fixed_.recompute && fixed_.recomputed != false;
    const bool micro_batch_free = !fixed_.micro_batch && !fixed_.micro_batches;
    if (zero_free && leanest.zero < 3) knobs.push_back("ZeRO stage 3");
    if (recompute_free && leanest.recompute != Recompute::kFull) knobs.push_back("recompute");
    if (micro_batch_free && leanest.micro_batch > 1) knobs.push_back("a smaller micro-batch (--max-micro-batch)");
    if (!zero_free || !recompute_free || !micro_batch_free) knobs.push_back("leaving --strategy's fixed choices free");
    knobs.push_back("a smaller --memory-margin");
    const std::string last = knobs.back();
    knobs.pop_back();
    return absl::StrCat(absl::StrJoin(knobs, ", "), " or ", last);
  }

  // Recompute policies, least time first.
  std::vector<Recompute> RecomputeChoices() const {
    if (!fixed_.recomputed) return {Recompute::kNone, Recompute::kSelective, Recompute::kFull};
    if (*fixed_.recomputed) return {Recompute::kSelective, Recompute::kFull};
    return {Recompute::kNone};
  }

  // Prices one candidate and files it. True when more recompute cannot help it: it fits, or a
  // bound showed it slower than the best so far.
  absl::StatusOr<bool> Consider(const Candidate& c, LayoutOutcome& layout) {
    ++result_.candidates;
    PDIST_ASSIGN_OR_RETURN(Estimate e, EstimateCandidate(c, model_, cluster_, profiler_, estimate_,
                                                         best_ * (1 + options_.tie_tolerance)));
    if (!leanest_ || e.memory.total() < leanest_->memory.total()) leanest_ = e;
    const bool slower = !e.simulated && e.pruned.rfind("slower", 0) == 0;
    if (slower) {
      layout.slower_bound = layout.slower_bound > 0 ? std::min(layout.slower_bound, e.step_time) : e.step_time;
    } else if (!e.fits && (!layout.leanest || e.memory.total() < layout.leanest->memory.total())) {
      layout.leanest = e;
    }
    if (!e.simulated) {
      ++result_.pruned;
      if (!slower) result_.too_big.push_back(std::move(e));
      return slower;
    }
    ++result_.simulated;
    if (!e.fits) {
      result_.too_big.push_back(e);
      return false;
    }
    best_ = std::min(best_, e.step_time);
    if (!layout.best || e.step_time < layout.best->step_time) layout.best = e;
    result_.ranked.push_back(std::move(e));
    return true;
  }

  // With nothing that fits, the plans that do not are priced whole in order of their memory's
  // lower bound (one micro-batch in flight, where a bound cut the pricing short) until the next
  // bound is past the least memory found: the plan named as the leanest is then the one that
  // needs least, and its figure what it needs, not a bound (another candidate's bound can be
  // below it and its whole need above). At most kLeanestRepriced of them; one that cannot be
  // priced whole keeps its bound.
  void PriceTheLeanestWhole() {
    EstimateOptions whole = estimate_;
    whole.prune_by_memory = false;
    double least = std::numeric_limits<double>::infinity();
    int repriced = 0;
    for (Estimate& e : result_.too_big) {
      if (e.memory.total() >= least || repriced == kLeanestRepriced) break;
      if (!e.simulated) {
        ++repriced;
        // One that cannot be priced whole keeps its bound (and says "at least").
        absl::StatusOr<Estimate> priced = EstimateCandidate(e.candidate, model_, cluster_, profiler_, whole,
                                                            std::numeric_limits<double>::infinity());
        if (priced.ok()) e = *std::move(priced);
      }
      least = std::min(least, e.memory.total());
    }
    SortByMemory(result_.too_big);
    leanest_ = result_.too_big.front();
  }

  static void SortByMemory(std::vector<Estimate>& estimates) {
    std::stable_sort(estimates.begin(), estimates.end(),
                     [](const Estimate& a, const Estimate& b) { return a.memory.total() < b.memory.total(); });
  }

  // Ranks what fits (ties within the tolerance to the simpler plan), or says why nothing does.
  absl::StatusOr<SearchResult> Finish() {
    SortByMemory(result_.too_big);
    if (result_.ranked.empty() && !result_.too_big.empty()) PriceTheLeanestWhole();
    if (result_.too_big.size() > kTooBigKept) result_.too_big.resize(kTooBigKept);
    if (result_.ranked.empty()) {
      if (!leanest_) {
        // Every reason (each is one line's worth; a search rarely has more than a few).
        return absl::FailedPreconditionError(absl::StrCat(
            "no candidate could be built: ",
            result_.skipped.empty() ? "the fixed choices leave no plan" : absl::StrJoin(result_.skipped, "; "),
            OnlyTheDeviceCountStandsInTheWay()
                ? " (a device count whose factors divide the batch, the heads, the vocabulary and the model's "
                  "segments plans; so may another batch)"
                : ""));
      }
      // What the leanest holds, term by term, says which knob would help; the hint names only
      // the knobs --strategy left free.
      // What fits first, then the device it is a share of; three significant digits, so that a
      // small device does not read "0.0 GB ... needs 0.0 GB".
      auto gb = [](double bytes) {
        return bytes >= 100e9 ? absl::StrFormat("%.0f GB", bytes / 1e9) : absl::StrFormat("%.3g GB", bytes / 1e9);
      };
      return absl::FailedPreconditionError(absl::StrFormat(
          "no plan fits in %s per device (%s less the %g%% margin): the leanest, %s, needs %s%s: %s; %s lower it",
          gb(leanest_->capacity), gb(cluster_.device.memory), options_.estimate.memory_margin * 100,
          leanest_->candidate.ToString(), leanest_->simulated ? "" : "at least ", gb(leanest_->memory.total()),
          leanest_->memory.ToString(), KnobsThatLowerMemory(leanest_->candidate)));
    }
    std::stable_sort(result_.ranked.begin(), result_.ranked.end(),
                     [](const Estimate& a, const Estimate& b) { return a.step_time < b.step_time; });
    const double limit = result_.ranked.front().step_time * (1 + options_.tie_tolerance);
    size_t pick = 0;
    for (size_t i = 1; i < result_.ranked.size() && result_.ranked[i].step_time <= limit; ++i) {
      if (result_.ranked[i].candidate.Complexity() < result_.ranked[pick].candidate.Complexity()) pick = i;
    }
    std::rotate(result_.ranked.begin(), result_.ranked.begin() + static_cast<ptrdiff_t>(pick),
                result_.ranked.begin() + static_cast<ptrdiff_t>(pick) + 1);
    return std::move(result_);
  }

  const PlannedModel& model_;
  const strategy::Cluster& cluster_;
  const SearchOptions& options_;
  const int64_t max_micro_batch_ = MaxMicroBatch(options_.max_micro_batch, model_.seq_len);
  const FixedChoices& fixed_;
  EstimateOptions estimate_;  // the search's, with the fixed stage cut found among the segments
  Profiler profiler_;
  SearchResult result_;
  std::set<std::string> skipped_;
  std::set<std::pair<int64_t, bool>> unprofiled_;  // (mp, sp) whose profile failed, its reason filed
  std::optional<Estimate> leanest_;  // least memory of any candidate, for the "nothing fits" error
  double best_ = std::numeric_limits<double>::infinity();
};

}  // namespace

int64_t MaxMicroBatch(int64_t max_micro_batch, int64_t seq_len) {
  if (max_micro_batch > 0) return max_micro_batch;
  if (seq_len <= 1) return kDefaultMaxMicroBatch;  // no sequence (a feature model): samples, not tokens
  return std::max(kDefaultMaxMicroBatch, kDefaultMaxMicroBatchTokens / seq_len);
}

absl::StatusOr<SearchResult> Search(const PlannedModel& model, const strategy::Cluster& cluster,
                                    const SearchOptions& options) {
  // A micro-batch fixed past a cap that was given is a contradiction, not a choice to make.
  const std::optional<int64_t>& fixed_micro_batch = options.fixed.micro_batch;
  if (options.max_micro_batch > 0 && fixed_micro_batch && *fixed_micro_batch > options.max_micro_batch) {
    return absl::InvalidArgumentError(absl::StrCat("pipeline.micro_batch_size ", *fixed_micro_batch,
                                                   " is past --max-micro-batch ", options.max_micro_batch,
                                                   ": raise the cap or fix a smaller micro-batch"));
  }
  return SearchRun(model, cluster, options).Run();
}

}  // namespace pdist::planner
