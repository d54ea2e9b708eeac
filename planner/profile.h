// Profiles: what each kind of segment of the model (planner/program_segments.h: an embedding,
// one repeated layer, a head — or the pieces of a program without repetition) costs one rank,
// for a tensor-parallel degree, sequence parallelism on or off and a micro-batch size — measured
// by running the real passes (pdist's engine builds exactly these programs) on the model cut
// into pipeline stages, one stage per kind (planner/planned_model.h's ProfileStages), and
// pricing each stage's partitioned local program:
//
//   GPT:  stage 0 = embedding,  stage 1 = layer 0,  stage 2 = head     (a 1-layer copy)
//
// The stages run the ZBH1 schedule so that the backward splits into input and weight gradients;
// a whole backward is their sum. Data parallelism, ZeRO and the schedule change how these costs
// combine, not the costs: planner/estimate.h combines them. Recompute changes what a segment
// keeps and what its backward replays, in ways the pass decides (it cuts where the fewest
// values cross, inside a layer too): a key with recompute profiles the programs the recompute
// pass made, and the planner takes a segment's activation memory from there (its times stay
// the plain profile's plus the replayed forward, as validated against published runs). A
// profile is cached by its key, so a search over thousands of candidates profiles a handful of
// programs.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "planner/candidate.h"
#include "planner/planned_model.h"
#include "planner/segment_cost.h"
#include "strategy/cluster.h"

namespace pdist::planner {

struct ProfileKey {
  int64_t mp = 1;
  bool sp = false;
  int64_t micro_batch = 1;
  Recompute recompute = Recompute::kNone;
  friend bool operator<(const ProfileKey& a, const ProfileKey& b) {
    return std::tie(a.mp, a.sp, a.micro_batch, a.recompute) < std::tie(b.mp, b.sp, b.micro_batch, b.recompute);
  }
};

struct ModelProfile {
  std::vector<SegmentCost> kinds;  // per segment kind: one micro-batch, one rank of the tensor-parallel group
  const SegmentCost& Of(const ProgramSegment& segment) const { return kinds[static_cast<size_t>(segment.kind)]; }
};

class Profiler {
 public:
  // Keeps a reference to `model` (it must outlive the profiler) and a copy of `cluster` (a
  // temporary from ClusterPreset is fine).
  Profiler(const PlannedModel& model, strategy::Cluster cluster) : model_(model), cluster_(std::move(cluster)) {}

  // Errors name the key: a degree the model's shapes cannot be split by, a micro-batch that does
  // not divide the batch.
  absl::StatusOr<const ModelProfile*> Get(const ProfileKey& key);
  int64_t programs_profiled() const { return static_cast<int64_t>(cache_.size()); }

  // A profiler of the same model on `cluster` that shares the programs this one has built: only
  // their ops are priced again. Building the programs (the passes, the partition) is most of a
  // profile's time; a fit over a device's efficiencies changes only the prices
  // (benchmarks/published_runs_benchmark.cc).
  Profiler OnCluster(strategy::Cluster cluster) const;
  // Keys whose programs were built, by this profiler or any sharing them.
  int64_t programs_built() const { return static_cast<int64_t>(programs_->size()); }

 private:
  // Each profiled segment kind's local program, as built for a key.
  using KindPrograms = std::vector<std::pair<int64_t, ir::Program>>;
  using ProgramCache = std::map<ProfileKey, absl::StatusOr<KindPrograms>>;

  absl::StatusOr<KindPrograms> Build(const ProfileKey& key) const;
  absl::StatusOr<ModelProfile> Measure(const ProfileKey& key);

  const PlannedModel& model_;
  const strategy::Cluster cluster_;
  std::shared_ptr<ProgramCache> programs_ = std::make_shared<ProgramCache>();
  std::map<ProfileKey, absl::StatusOr<ModelProfile>> cache_;
};

}  // namespace pdist::planner
