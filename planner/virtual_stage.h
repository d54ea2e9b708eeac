// A virtual stage of a candidate (pipeline stage k mod pp, chunk k / pp) priced from its
// segments' profiles: the costs of its F, B, W and optimizer jobs as the schedule's simulator
// takes them, what recompute adds, ZeRO-3's exposed gathers and the activations one micro-batch
// keeps alive. planner/estimate.cc combines the virtual stages into a step.
#pragma once

#include <cstdint>
#include <vector>

#include "passes/pipeline_schedule.h"
#include "planner/candidate.h"
#include "planner/profile.h"
#include "planner/segment_cost.h"
#include "planner/stage_layout.h"
#include "strategy/cluster.h"

namespace pdist::planner {

// Devices of stage s (its first data-parallel replica's first tensor-parallel rank and so on):
// rank = (s · dp + d) · mp + t, as the engine numbers them.
int64_t DeviceOf(const Candidate& c, int64_t stage, int64_t d, int64_t t);
// The first tensor-parallel rank of every data-parallel replica of `stage`.
std::vector<int64_t> DataParallelGroup(const Candidate& c, int64_t stage);
// Under ZeRO, of those: the first shard group (c.ShardRanks() consecutive data-parallel ranks, all
// of them unless hybrid), and the replicas of its first shard (one per group; a single rank
// unless hybrid).
std::vector<int64_t> ShardGroup(const Candidate& c, int64_t stage);
std::vector<int64_t> ShardReplicaGroup(const Candidate& c, int64_t stage);

// Everything about one virtual stage that the jobs and the memory need.
struct VirtualStage {
  SegmentCost cost;   // its segments, one micro-batch
  int64_t segments = 0;
  int64_t layers = 0;  // of which repeated layers (what recompute replays, what buckets are cut by)
  double workspace = 0;  // what replaying its largest layer holds at once (recompute only)
  passes::JobCosts jobs;
  double recompute = 0;  // seconds added to its backward
  double gather = 0;     // ZeRO-3 parameter all-gather before each F and B, exposed part
  double saved = 0;      // activation bytes one in-flight micro-batch keeps
  // Per segment, in model order: what it keeps for the backward (after recompute), what its
  // backward holds besides (recompute's replayed activations, activation gradients), that with
  // its own parameter gradients as they appear (SegmentCost::backward_excess_with_grads_bytes),
  // and its parameters' gradient bytes, for the backward's liveness walk (BackwardPeak).
  std::vector<double> segment_saved, segment_workspace, segment_with_grads, segment_grads;
  // And its workspace in a later micro-batch's backward, each gradient joining its whole sum as
  // it is made (SegmentCost::backward_excess_accumulating_bytes), for LaterBackwardPeak.
  std::vector<double> segment_accumulating;
};

// The most activation and gradient bytes live at once in the backward of one micro-batch whose
// gradients start empty: the backward runs the segments last to first, freeing each segment's
// activations as its gradients appear, so the live bytes while segment j runs are
// Σ_{i≤j} saved_i + own_j + Σ_{i>j} grads_i · grad_scale, own_j being segment j's workspace
// with its own gradients as they appear (scaled between the two walks' peaks) — at most the sum
// of the three, and less the more the stage has segments (activations drain while gradients
// fill, and a layer's replay lives only while its backward runs). `grad_scale`: the fraction of
// each gradient a rank keeps (1/dp under ZeRO 2 and 3).
double BackwardPeak(const VirtualStage& s, double grad_scale);

// The same walk for a later micro-batch's backward over whole gradient sums: beside the sums
// (priced by the caller), segment j's backward holds the saved values of segments 0..j and its
// accumulating workspace — max_j (Σ_{i≤j} saved_i + accumulating_j).
double LaterBackwardPeak(const VirtualStage& s);

// Prices virtual stage k (segments `seg`, on pipeline stage k mod pp): its jobs' costs, what
// recompute adds to its backward, ZeRO-3's gathers (prefetched behind compute as pdist's engine
// runs them, or with `fsdp_schedule` exposed whole, as PyTorch FSDP's published runs show them:
// EstimateOptions::fsdp_schedule), the activations a micro-batch keeps.
// `replayed`: the profile of the programs the recompute pass made (a key with c.recompute), where
// each segment's kept activations and replayed transient come from; null without recompute
// (EstimateCandidate gets it from the profiler).
VirtualStage PriceVirtualStage(const Candidate& c, const PlannedModel& model, const ModelProfile& profile,
                               const ModelProfile* replayed, const StageLayout::Segments& seg, int64_t k,
                               const strategy::Cluster& cluster, bool fsdp_schedule = false);

}  // namespace pdist::planner
