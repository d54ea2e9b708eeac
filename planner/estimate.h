// Estimate: the predicted step time and per-rank memory of one candidate, from the profiles of
// its segments (planner/profile.h), the cluster's links and the schedule's simulation.
//
//   Profiler profiler(model, cluster);
//   PDIST_ASSIGN_OR_RETURN(Estimate e, EstimateCandidate(candidate, model, cluster, profiler, {}));
//   e.step_time; e.fits; e.memory.total(); e.time.bubble;
//
// How the pieces combine (docs/cost_model.md has the formulas and their sources):
//   - the model's segments (embedding, layers, head, or what the graph has) go to the pp × vpp
//     virtual stages so that the slowest is as fast as possible (or as a strategy file cuts
//     them: EstimateOptions::stage_cut); the cut is written into the strategy;
//   - a virtual stage's jobs cost the sum of its segments' F, B, W (recompute adds the forward
//     it redoes to B) and run through the schedule's simulator with p2p on every cross-stage
//     dependency: bubbles, warm-up and cool-down are counted as they happen;
//   - the data-parallel gradient all-reduce (ZeRO 1/2: reduce-scatter + all-gather, the same
//     bus volume; ZeRO 3: reduce-scatter, plus a parameter all-gather before each F and B) is
//     bucketed by layer and overlaps the (last micro-batch's) backward except its last bucket;
//   - ranks that are threads sharing a machine's cores (Cluster::shared_cores): the step is at
//     least the node's compute over the number of ranks its cores run at full speed at once, at
//     the measured time-slicing efficiency; a rank idle in a bubble or waiting in a collective
//     lends its core to the others;
//   - memory: parameters, gradients and optimizer states divided by dp as the ZeRO stage says,
//     activations times the most micro-batches the simulated schedule keeps alive, a layer's
//     recompute workspace, two fusion buckets; activations and gradients counted together at
//     the step's worst moment (the backward's, or the optimizer's); the device's memory less the
//     margin must hold it.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/types.h"
#include "planner/candidate.h"
#include "planner/planned_model.h"
#include "planner/profile.h"
#include "planner/stage_layout.h"
#include "strategy/cluster.h"

namespace pdist::planner {

struct EstimateOptions {
  // Fraction of device memory kept free for the runtime (CUDA context, NCCL, allocator
  // fragmentation). docs/cost_model.md says why 10%.
  double memory_margin = 0.10;
  double bucket_bytes = 25e6;  // data-parallel gradient fusion bucket
  // Whether the data-parallel gradient synchronisation overlaps the backward, as pdist's engine
  // does (each bucket starts during the last backward); pricing a published run of another system
  // (benchmarks/published_runs_benchmark.cc) may need an all-reduce after it (Megatron-LM's
  // "local" DDP).
  bool overlap_gradient_sync = true;
  // Price ZeRO-3 as PyTorch FSDP (FULL_SHARD) ran the published runs that use it, instead of as
  // pdist's engine runs it: every micro-batch gathers each segment's parameters for its forward
  // and again for its backward and reduce-scatters its own gradients, in `fsdp_reduce_dtype`,
  // and none of it hides behind compute. pdist's engine gathers one segment ahead on its
  // communication stream and reduce-scatters once per step. docs/cost_model.md ("H100") gives
  // the evidence for "none": the published FSDP runs fit at 2.6% with it, 5.9% without.
  bool fsdp_schedule = false;
  ir::DataType fsdp_reduce_dtype = ir::DataType::kFloat32;
  // The stage cut a strategy file fixes; none: the virtual stages balanced by priced time.
  std::optional<StageCut> stage_cut;
  // False: a candidate whose memory bound is past the capacity is priced whole all the same, its
  // memory then what it needs, not a bound (naming the leanest plan when nothing fits).
  bool prune_by_memory = true;
};

struct TimeBreakdown {
  double compute = 0;    // F, B, W and optimizer on the busiest rank, without recompute or collectives
  double recompute = 0;  // the forward redone in the backward
  double mp_comm = 0;    // tensor-parallel collectives inside the jobs
  double dp_comm = 0;    // data-parallel / ZeRO communication not hidden behind the backward
  double pp_comm = 0;    // what pipeline sends add to the step (simulated with and without)
  double bubble = 0;     // the busiest rank idle, waiting for other stages
  // Ranks that share cores (Cluster::shared_cores): what the step grows by because the node's
  // work exceeds what its cores do at once.
  double core_sharing = 0;
};

struct MemoryBreakdown {
  // Each kind's own peak (activations: what the in-flight micro-batches keep for the backward).
  double parameters = 0, gradients = 0, optimizer_states = 0, activations = 0, workspace = 0;
  // The most gradient, activation and workspace bytes live at once, when known: they do not peak
  // together — with one micro-batch the backward frees each segment's activations as its
  // gradients appear (virtual_stage.h BackwardPeak), and the optimizer turns each gradient into
  // new values of the persistent tensors. -1: their sum.
  double transient_peak = -1;
  double transient() const { return transient_peak >= 0 ? transient_peak : gradients + activations + workspace; }
  double total() const { return parameters + optimizer_states + transient(); }
  // "parameters 0.667  gradients 0.667  optimizer states 4  activations 67.4  workspace 2.53
  // (GB; at most 70.6 of gradients, activations and workspace at once)"
  std::string ToString() const;
};

struct Estimate {
  Candidate candidate;
  // False when EstimateCandidate stopped before simulating the schedule because a bound showed
  // the candidate cannot win (`pruned` says why); step_time and memory are then lower bounds.
  bool simulated = true;
  std::string pruned;
  double step_time = 0;  // seconds
  TimeBreakdown time;
  MemoryBreakdown memory;           // of the rank that needs the most
  double capacity = 0;              // usable bytes per device (memory less the margin)
  bool fits = false;
  std::vector<std::string> split_before;  // the priced stage cut
  double tokens_per_s = 0;
  double tflops_per_device = 0;     // model FLOPs (no recompute) per second per device
  double mfu = 0;
};

// The model FLOPs of one training step (forward and backward, no recompute, attention without
// its causal mask: the count MFU and TFLOP/s per device use, ir::OpCost::model_flops), from the
// single-device profile at micro-batch 1 (FLOPs are linear in the batch).
absl::StatusOr<double> ModelFlopsPerStep(const PlannedModel& model, Profiler& profiler);

// InvalidArgument naming what does not fit together (degrees whose product is not the device
// count, a batch the micro-batching does not divide, more virtual stages than the model has segments); a
// profile's error (a degree the shapes cannot be split by) is passed on.
//
// `beat`: the step time a candidate must beat to matter. When the busiest rank's work alone
// (a lower bound on the step) exceeds it, or the memory without any activation in flight exceeds
// the capacity, the schedule is not simulated and the estimate comes back with `pruned` set.
absl::StatusOr<Estimate> EstimateCandidate(const Candidate& c, const PlannedModel& model,
                                           const strategy::Cluster& cluster, Profiler& profiler,
                                           const EstimateOptions& options,
                                           double beat = std::numeric_limits<double>::infinity());

}  // namespace pdist::planner
