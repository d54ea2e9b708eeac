#include "planner/estimate.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "engine/distributed_programs.h"
#include "ir/status.h"
#include "planner/comm_cost.h"
#include "planner/stage_layout.h"

namespace pdist::planner {
namespace {

using ir::OpRole;
using passes::JobCosts;

// Devices of stage s (its first data-parallel replica's first tensor-parallel rank and so on):
// rank = (s · dp + d) · mp + t, as the engine numbers them.
int64_t DeviceOf(const Candidate& c, int64_t stage, int64_t d, int64_t t) { return (stage * c.dp + d) * c.mp + t; }

std::vector<int64_t> DataParallelGroup(const Candidate& c, int64_t stage) {
  std::vector<int64_t> group;
  for (int64_t d = 0; d < c.dp; ++d) group.push_back(DeviceOf(c, stage, d, 0));
  return group;
}

absl::Status CheckShape(const Candidate& c, const PlannedModel& model, const strategy::Cluster& cluster) {
  if (c.dp < 1 || c.mp < 1 || c.pp < 1 || c.vpp < 1 || c.micro_batch < 1 || c.micro_batches < 1) {
    return absl::InvalidArgumentError(absl::StrCat(c.ToString(), ": every degree and count must be >= 1"));
  }
  if (c.devices() != cluster.num_devices()) {
    return absl::InvalidArgumentError(absl::StrCat(c.ToString(), ": dp × mp × pp = ", c.devices(), " but the cluster has ",
                                                   cluster.num_devices(), " devices"));
  }
  if (c.dp * c.micro_batch * c.micro_batches != model.global_batch) {
    return absl::InvalidArgumentError(absl::StrCat(c.ToString(), ": dp × micro-batch × micro-batches = ",
                                                   c.dp * c.micro_batch * c.micro_batches, ", not the global batch ",
                                                   model.global_batch));
  }
  if (c.sp && c.mp == 1) return absl::InvalidArgumentError(absl::StrCat(c.ToString(), ": sp needs mp > 1"));
  if (c.zero > 0 && c.dp == 1) return absl::InvalidArgumentError(absl::StrCat(c.ToString(), ": ZeRO needs dp > 1"));
  if (c.zero < 0 || c.zero > 3) return absl::InvalidArgumentError(absl::StrCat(c.ToString(), ": ZeRO stage must be 0-3"));
  return passes::CheckScheduleShape(c.schedule, {.stages = c.pp, .micro_batches = c.micro_batches, .chunks = c.vpp});
}

// Everything about one virtual stage that the jobs and the memory need.
struct VirtualStage {
  SegmentCost cost;   // its segments, one micro-batch
  int64_t layers = 0;
  JobCosts jobs;
  double recompute = 0;  // seconds added to its backward
  double gather = 0;     // ZeRO-3 parameter all-gather before each F and B, exposed part
  double saved = 0;      // activation bytes one in-flight micro-batch keeps
};

struct StageTotals {
  double busy = 0;   // seconds of jobs in one step
  double saved = 0;  // activation bytes per micro-batch in flight (the largest chunk's)
  TimeBreakdown time;
  MemoryBreakdown memory;
};

}  // namespace

absl::StatusOr<double> ModelFlopsPerStep(const PlannedModel& model, Profiler& profiler) {
  PDIST_ASSIGN_OR_RETURN(const ModelProfile* p, profiler.Get({.mp = 1, .sp = false, .micro_batch = 1}));
  return (p->embedding.flops + p->layer.flops * static_cast<double>(model.layers) + p->head.flops) *
         static_cast<double>(model.global_batch);
}

absl::StatusOr<Estimate> EstimateCandidate(const Candidate& c, const PlannedModel& model,
                                           const strategy::Cluster& cluster, Profiler& profiler,
                                           const EstimateOptions& options, double beat) {
  PDIST_RETURN_IF_ERROR(CheckShape(c, model, cluster));
  PDIST_ASSIGN_OR_RETURN(const ModelProfile* profile, profiler.Get({.mp = c.mp, .sp = c.sp, .micro_batch = c.micro_batch}));
  const int64_t p = c.pp, v = c.vpp, m = c.micro_batches;
  PDIST_ASSIGN_OR_RETURN(StageLayout layout, LayoutStages(*profile, model, p * v));

  Estimate e;
  e.candidate = c;
  e.split_before = layout.split_before;
  const bool split = c.schedule == passes::ScheduleMode::kZBH1;
  const double boundary = profile->layer.boundary_bytes;

  std::vector<VirtualStage> vs(static_cast<size_t>(p * v));
  for (int64_t k = 0; k < p * v; ++k) {
    VirtualStage& s = vs[k];
    const StageLayout::Segments& seg = layout.stages[k];
    s.layers = seg.layers;
    s.cost = profile->layer * static_cast<double>(seg.layers);
    if (seg.embedding) s.cost += profile->embedding;
    if (seg.head) s.cost += profile->head;
    const double n = static_cast<double>(seg.layers);
    switch (c.recompute) {
      case Recompute::kNone: s.saved = s.cost.saved_bytes; break;
      case Recompute::kSelective:
        s.recompute = n * profile->layer.recomputable_seconds;
        s.saved = s.cost.saved_bytes - n * profile->layer.recomputable_bytes;
        break;
      case Recompute::kFull:
        s.recompute = n * profile->layer.Seconds(OpRole::kForward);
        s.saved = s.cost.saved_bytes - n * (profile->layer.saved_bytes - boundary);
        break;
    }
    if (c.zero == 3 && c.dp > 1) {
      const double gather = CollectiveSeconds(cluster, Collective::kAllGather, s.cost.param_bytes,
                                              DataParallelGroup(c, k % p));
      // Prefetched one segment ahead: hidden behind the job except the first segment's share
      // and whatever exceeds the job's compute.
      const double segments = std::max(1.0, n + (seg.embedding ? 1 : 0) + (seg.head ? 1 : 0));
      s.gather = gather / segments + std::max(0.0, gather - s.cost.Seconds(OpRole::kForward));
    }
    s.jobs.forward = s.cost.Seconds(OpRole::kForward) + s.gather;
    s.jobs.backward_input = s.cost.Seconds(OpRole::kBackward) + s.recompute + s.gather;
    s.jobs.backward_weight = s.cost.Seconds(OpRole::kBackwardWeight);
    s.jobs.backward = s.jobs.backward_input + s.jobs.backward_weight;
    s.jobs.optimizer = s.cost.Seconds(OpRole::kOptimizer) / (c.zero > 0 ? static_cast<double>(c.dp) : 1.0);
    // A cross-stage dependency of stage s waits for a send from its neighbour; the slower link.
    const int64_t stage = k % p;
    double p2p = 0;
    for (int64_t neighbour : {stage - 1, stage + 1}) {
      if (p == 1) break;
      const int64_t other = (neighbour + p) % p;
      p2p = std::max(p2p, CollectiveSeconds(cluster, Collective::kSendRecv, boundary,
                                            {DeviceOf(c, stage, 0, 0), DeviceOf(c, other, 0, 0)}));
    }
    s.jobs.p2p = p2p;
  }

  // Data-parallel gradient synchronisation, per stage, in its optimizer job.
  std::vector<double> dp_exposed(static_cast<size_t>(p), 0.0);
  if (c.dp > 1) {
    for (int64_t stage = 0; stage < p; ++stage) {
      double grads = 0, layers = 0;
      for (int64_t chunk = 0; chunk < v; ++chunk) {
        grads += vs[chunk * p + stage].cost.grad_bytes;
        layers += static_cast<double>(vs[chunk * p + stage].layers);
      }
      const Collective kind = c.zero == 3 ? Collective::kReduceScatter : Collective::kAllReduce;
      const double sync = CollectiveSeconds(cluster, kind, grads, DataParallelGroup(c, stage));
      const double buckets = std::max(1.0, layers);
      const VirtualStage& last = vs[stage];  // the last backward of a stage is its chunk 0
      const double overlap = (split ? last.jobs.backward_input + last.jobs.backward_weight : last.jobs.backward) *
                             (1 - 1 / buckets);
      dp_exposed[stage] = std::max(sync / buckets, sync - overlap);
      vs[stage].jobs.optimizer += dp_exposed[stage];
    }
  }

  // Per stage: its work (a lower bound on the step) and its memory but for the activations.
  const double mb = static_cast<double>(m);
  std::vector<StageTotals> totals(static_cast<size_t>(p));
  e.capacity = cluster.device.memory * (1 - options.memory_margin);
  double busiest = 0, leanest_need = 0;
  for (int64_t stage = 0; stage < p; ++stage) {
    StageTotals& st = totals[stage];
    for (int64_t chunk = 0; chunk < v; ++chunk) {
      const VirtualStage& s = vs[chunk * p + stage];
      st.busy += mb * (s.jobs.forward + s.jobs.backward);
      st.time.recompute += mb * s.recompute;
      st.time.dp_comm += mb * 2 * s.gather;
      for (OpRole role : {OpRole::kForward, OpRole::kBackward, OpRole::kBackwardWeight, OpRole::kOptimizer}) {
        st.time.mp_comm += (role == OpRole::kOptimizer ? 1 : mb) * s.cost.MpCommSeconds(role);
      }
      st.memory.parameters += s.cost.param_bytes;
      st.memory.gradients += s.cost.grad_bytes;
      st.memory.optimizer_states += s.cost.optimizer_state_bytes;
      st.saved = std::max(st.saved, s.saved);
      if (s.layers > 0 && c.recompute == Recompute::kFull) st.memory.workspace = std::max(st.memory.workspace, profile->layer.saved_bytes);
      if (s.layers > 0 && c.recompute == Recompute::kSelective) {
        st.memory.workspace = std::max(st.memory.workspace, profile->layer.recomputable_bytes);
      }
    }
    st.busy += vs[stage].jobs.optimizer;
    st.time.dp_comm += dp_exposed[stage];
    st.time.compute = st.busy - st.time.recompute - st.time.dp_comm - st.time.mp_comm;
    const double dp = static_cast<double>(c.dp);
    if (c.zero >= 1) st.memory.optimizer_states /= dp;
    if (c.zero >= 2) st.memory.gradients /= dp;
    if (c.zero >= 3) st.memory.parameters /= dp;
    st.memory.workspace += c.dp > 1 ? 2 * options.bucket_bytes : 0;
    st.memory.activations = st.saved;  // at least one micro-batch in flight
    busiest = std::max(busiest, st.busy);
    if (st.memory.total() > leanest_need) {
      leanest_need = st.memory.total();
      e.memory = st.memory;
    }
  }
  if (busiest > beat || leanest_need > e.capacity) {
    e.simulated = false;
    e.step_time = busiest;
    e.pruned = busiest > beat ? absl::StrCat("slower: its busiest rank alone works ", busiest, " s")
                              : absl::StrCat("out of memory: needs at least ", leanest_need, " bytes");
    return e;
  }

  std::vector<std::vector<ir::PipelineJob>> per_stage;
  for (int64_t stage = 0; stage < p; ++stage) {
    PDIST_ASSIGN_OR_RETURN(auto jobs, passes::BuildSchedule(c.schedule, {.stages = p, .micro_batches = m, .chunks = v}, stage));
    per_stage.push_back(std::move(jobs));
  }
  std::vector<JobCosts> costs;
  for (const VirtualStage& s : vs) costs.push_back(s.jobs);
  const passes::ScheduleShape shape{.stages = p, .micro_batches = m, .chunks = v};
  PDIST_ASSIGN_OR_RETURN(passes::SimulatedSchedule sim, passes::SimulateSchedule(per_stage, shape, costs));
  double without_p2p = sim.makespan;
  if (p > 1) {
    for (JobCosts& j : costs) j.p2p = 0;
    PDIST_ASSIGN_OR_RETURN(passes::SimulatedSchedule no_p2p, passes::SimulateSchedule(per_stage, shape, costs));
    without_p2p = no_p2p.makespan;
  }
  e.step_time = sim.makespan;
  e.memory = {};
  double busiest_seen = -1;
  for (int64_t stage = 0; stage < p; ++stage) {
    StageTotals& st = totals[stage];
    st.memory.activations = st.saved * static_cast<double>(sim.peak_in_flight[stage]);
    if (st.busy > busiest_seen) {
      busiest_seen = st.busy;
      e.time = st.time;
      e.time.pp_comm = sim.makespan - without_p2p;
      e.time.bubble = without_p2p - st.busy;
    }
    if (st.memory.total() > e.memory.total()) e.memory = st.memory;
  }
  if (cluster.shared_cores > 0) {
    const int64_t threads_per_rank = std::max<int64_t>(1, cluster.shared_cores / cluster.devices_per_node);
    const double at_once = static_cast<double>(std::max<int64_t>(1, cluster.shared_cores / threads_per_rank));
    double work = 0;
    for (const StageTotals& st : totals) work += st.busy * static_cast<double>(c.dp * c.mp);
    const double contended = work / static_cast<double>(cluster.nodes) / std::min(at_once, static_cast<double>(cluster.devices_per_node));
    if (contended > e.step_time) {
      e.time.core_sharing = contended - e.step_time;
      e.step_time = contended;
    }
  }
  e.fits = e.memory.total() <= e.capacity;
  if (absl::Status s = engine::CheckExecutable(c.ToStrategy(e.split_before)); !s.ok()) {
    e.not_executable = std::string(s.message());
  }
  PDIST_ASSIGN_OR_RETURN(double flops, ModelFlopsPerStep(model, profiler));
  e.tokens_per_s = static_cast<double>(model.global_batch * model.seq_len) / e.step_time;
  e.tflops_per_device = flops / e.step_time / static_cast<double>(c.devices()) / 1e12;
  absl::StatusOr<double> peak = cluster.PeakFlops(model.dtype);
  e.mfu = peak.ok() ? e.tflops_per_device * 1e12 / *peak : 0;
  return e;
}

}  // namespace pdist::planner
