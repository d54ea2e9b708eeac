// Search: the fastest candidate that fits, over every factorisation of the devices into data ×
// tensor × pipeline parallel degrees, sequence parallelism, ZeRO stage, micro-batch size and
// count, schedule (1F1B, ZBH1, VPP and its degree) and recompute (none, selective, full).
//
//   SearchOptions o;
//   o.fixed.mp = 8;                                   // what the user's strategy file sets
//   o.progress = [](const SearchProgress& p) { ... };
//   PDIST_ASSIGN_OR_RETURN(SearchResult r, Search(model, cluster, o));
//   r.best();                                          // the plan; r.ranked: the others that fit
//
// What keeps it fast: segments are profiled once per (mp, sp, micro-batch) (planner/profile.h);
// a candidate whose busiest rank alone works longer than the best step so far, or whose memory
// without activations exceeds the device, is not simulated; and recompute or a higher ZeRO stage
// is not tried once a plan with less of it fits (they only add time, except ZeRO-1's sharded
// optimizer step, which the loop tries before it stops).
// Ties (within `tie_tolerance` of the fastest) go to the simpler plan (Candidate::Complexity).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "planner/estimate.h"

namespace pdist::planner {

// What the user fixed (from a strategy file); unset fields are searched.
struct FixedChoices {
  std::optional<int64_t> dp, mp, pp, vpp, zero, micro_batch, micro_batches;
  std::optional<int64_t> zero_degree;  // sharding.degree: ranks per ZeRO shard group
  std::optional<bool> sp;
  std::optional<bool> accumulate_shards;  // sharding.accumulate_shards
  std::optional<passes::ScheduleMode> schedule;
  std::optional<Recompute> recompute;
  // Whether there is ZeRO (a stage of 1..3, the search's unless `zero` says), whether there is
  // recompute (selective or full unless `recompute` says). (pipeline.enable is no choice: pdist
  // derives it from the degrees and micro-batches, docs/strategy.md.)
  std::optional<bool> sharded, recomputed;
  // pipeline.split_before: the stage cut, which fixes pp × vpp to its marks + 1 (empty: the
  // search cuts each layout by priced time).
  std::vector<std::string> split_before;
};

struct SearchProgress {
  int64_t factorisations_done = 0, factorisations = 0;
  int64_t priced = 0;  // candidates estimated so far
  double best_step_time = 0;  // 0 until one fits
};

struct SearchOptions {
  FixedChoices fixed;
  bool tensor_parallel_across_nodes = false;  // allow mp beyond one node
  // The largest micro-batch tried, in sequences; 0: MaxMicroBatch's default, which grows for
  // short sequences (a 512-token run's best micro-batch can be past 64: MosaicML's ran 128).
  int64_t max_micro_batch = 0;
  double tie_tolerance = 0.01;
  EstimateOptions estimate;
  std::function<void(const SearchProgress&)> progress;
};

// The largest micro-batch the search tries for sequences of `seq_len` tokens: `max_micro_batch`
// where it is set, else 64 sequences or as many as make 131,072 tokens, whichever is more (64 for
// a model without a sequence, whose seq_len is 1).
inline constexpr int64_t kDefaultMaxMicroBatch = 64;
inline constexpr int64_t kDefaultMaxMicroBatchTokens = 131072;
int64_t MaxMicroBatch(int64_t max_micro_batch, int64_t seq_len);

// How one dp × mp × pp layout fared: its fastest plan that fits, or why it has none.
struct LayoutOutcome {
  int64_t dp = 1, mp = 1, pp = 1;
  std::optional<Estimate> best;     // fastest that fits
  std::optional<Estimate> leanest;  // least memory, when nothing fits
  double slower_bound = 0;          // the least work bound of candidates cut as slower (s)
  std::string not_built;            // why its candidates could not be built, if they could not
};

struct SearchResult {
  std::vector<Estimate> ranked;    // fit, best first
  std::vector<Estimate> too_big;   // out of memory, least memory first (for --explain); memory is a
                                   // lower bound where !simulated
  std::vector<std::string> skipped;  // configurations that cannot be built, with the reason
  std::vector<LayoutOutcome> layouts;  // every factorisation tried, in search order
  int64_t candidates = 0;   // generated
  int64_t simulated = 0;    // priced through the schedule simulation
  int64_t pruned = 0;       // stopped by a bound
  int64_t programs_profiled = 0;
  double seconds = 0;       // wall time of the search
  double model_flops_per_step = 0;

  const Estimate& best() const { return ranked.front(); }
};

// FailedPrecondition when no candidate fits, naming the leanest candidate and the memory it
// needs against the capacity; InvalidArgument when the fixed choices contradict the cluster, the
// batch (a degree that does not divide the device count) or the model (a stage cut inside one of
// its segments).
absl::StatusOr<SearchResult> Search(const PlannedModel& model, const strategy::Cluster& cluster,
                                    const SearchOptions& options);

// The divisors of n in increasing order.
std::vector<int64_t> Divisors(int64_t n);

// The ZeRO shard groups tried for a candidate with ZeRO on (Candidate::zero_degree): all of dp
// (0), and hybrid sharding over the data-parallel ranks of one node — what PyTorch FSDP's HYBRID_SHARD does,
// shards within the node, replicas across nodes — when that is a proper divisor of dp; the fixed
// degree instead when there is one (empty when it does not divide dp).
std::vector<int64_t> ZeroDegreeChoices(const Candidate& c, const strategy::Cluster& cluster, const FixedChoices& fixed);

}  // namespace pdist::planner
