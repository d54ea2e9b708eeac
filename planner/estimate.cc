#include "planner/estimate.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "passes/distributed_programs.h"
#include "passes/schedules/schedule_def.h"
#include "ir/status.h"
#include "planner/comm_cost.h"
#include "planner/stage_layout.h"
#include "planner/virtual_stage.h"

namespace pdist::planner {

std::string MemoryBreakdown::ToString() const {
  constexpr double kGB = 1e9;
  return absl::StrFormat(
      "parameters %.3g  gradients %.3g  optimizer states %.3g  activations %.3g  workspace %.3g  "
      "(GB; at most %.3g of gradients, activations and workspace at once)",
      parameters / kGB, gradients / kGB, optimizer_states / kGB, activations / kGB, workspace / kGB, transient() / kGB);
}
namespace {

using ir::OpRole;
using passes::JobCosts;

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
  if (c.zero_degree < 0 || (c.zero_degree > 0 && c.dp % c.zero_degree != 0)) {
    return absl::InvalidArgumentError(absl::StrCat(c.ToString(), ": sharding degree ", c.zero_degree, " does not divide dp ", c.dp));
  }
  return passes::CheckScheduleShape(c.schedule, {.stages = c.pp, .micro_batches = c.micro_batches, .chunks = c.vpp});
}

struct StageTotals {
  double busy = 0;   // seconds of jobs in one step
  double saved = 0;  // activation bytes per micro-batch in flight (the largest chunk's)
  // The liveness walk of the stage's first backward (BackwardPeak): its activations freed as its
  // gradients appear. -1 with model chunks, whose backwards interleave: every gradient is then
  // counted beside every micro-batch in flight.
  double first_backward_peak = -1;
  double bucket_bytes = 0;  // the two gradient-fusion buckets in flight (part of the workspace)
  // The buckets go out in the last micro-batch's backward (executor/pipeline_run.cc,
  // EarlyGradientSync): beside the first backward only when that is the last one, or when every
  // backward reduce-scatters its own (sharding.accumulate_shards).
  double buckets_at_first_backward = 0;
  double largest_update = 0;         // one optimizer op's new tensors (its slice under ZeRO)
  // A later micro-batch's backward over whole gradient sums (LaterBackwardPeak, beside the sums
  // and the buckets); -1 where the later backwards are priced as a whole (model chunks,
  // accumulated shards, whose fresh gradients go to the communication stream).
  double later_backward_peak = -1;
  bool gathers_parameters = false;   // ZeRO 1 and 2: the updated parameters come back whole
  TimeBreakdown time;
  MemoryBreakdown memory;
};

// Micro-batches alive on a stage (passes::SimulatedSchedule): the most at once, at its first
// backward and at any later one (0: none).
struct InFlight {
  double peak = 1, at_first_backward = 1, at_later_backwards = 0;
  // The most activation bytes alive at once (each chunk's own per micro-batch); < 0: the
  // largest chunk's times `peak`.
  double peak_bytes = -1;
};

// The activations of the micro-batches alive at most, and the transient peak: the backward's
// or the optimizer's. The first backward walks its own micro-batch beside the others alive then,
// making the gradients as it frees the activations; a later one starts with every gradient sum
// whole beside the micro-batches alive then. (With 1F1B and no more micro-batches than stages,
// the first stages' activations peak at their first backward, before any gradient exists.)
// The optimizer's ops start with every gradient live and the executor installs each
// parameter's new value and states as soon as the op has made them (executor/memory_planner.h:
// an in-place update), so beside the gradients there is one op's new tensors. Under ZeRO 1 and
// 2 the new parameters come back whole (all-gathered; the step installs them at its end) while
// the gradients go, each at its update: the two sum to at most the larger.
void SettleTransients(StageTotals& st, const InFlight& alive) {
  MemoryBreakdown& m = st.memory;
  m.activations = alive.peak_bytes >= 0 ? alive.peak_bytes : st.saved * alive.peak;
  double backward = m.gradients + m.activations + m.workspace;
  if (st.first_backward_peak >= 0) {
    // The walk holds each layer's replay while it runs; the buckets are beside it throughout.
    backward = (alive.at_first_backward - 1) * st.saved + st.first_backward_peak + st.buckets_at_first_backward;
    if (alive.at_later_backwards > 0) {
      const double later = st.later_backward_peak >= 0
                               ? (alive.at_later_backwards - 1) * st.saved + st.later_backward_peak + st.bucket_bytes
                               : alive.at_later_backwards * st.saved + m.workspace;
      backward = std::max(backward, later + m.gradients);
    }
  }
  const double optimizer = std::max(m.gradients, st.gathers_parameters ? m.parameters : 0) + st.largest_update;
  m.transient_peak = std::max(backward, optimizer);
}

// One pipeline stage's parameters and gradients over its chunks, what its synchronisation moves.
struct StageBytes {
  double grads = 0, params = 0, elements = 0, layers = 0;
};

// The gradient synchronisation of `grad_bytes` on a stage: an all-reduce over dp; ZeRO 2 and 3
// reduce-scatter instead (hybrid: over the shard group, then all-reduce the shard over its
// replicas).
double GradientSyncSeconds(const Candidate& c, const strategy::Cluster& cluster, int64_t stage, double grad_bytes) {
  if (c.zero < 2) return CollectiveSeconds(cluster, Collective::kAllReduce, grad_bytes, DataParallelGroup(c, stage));
  double sync = CollectiveSeconds(cluster, Collective::kReduceScatter, grad_bytes, ShardGroup(c, stage));
  if (c.HybridZero()) {
    sync += CollectiveSeconds(cluster, Collective::kAllReduce, grad_bytes / static_cast<double>(c.ShardRanks()),
                              ShardReplicaGroup(c, stage));
  }
  return sync;
}

// What a backward of `backward` seconds leaves exposed of `sync` seconds of its gradients'
// synchronisation, bucketed by layer (`layers` buckets): all but the last bucket overlap it.
double ExposedBehindBackward(double sync, double backward, double layers, const EstimateOptions& options) {
  if (!options.overlap_gradient_sync) return sync;
  const double buckets = std::max(1.0, layers);
  return std::max(sync / buckets, sync - backward * (1 - 1 / buckets));
}

// ZeRO 1 and 2's all-gather of the updated parameters after the step, with nothing to hide behind.
double ParameterGatherSeconds(const Candidate& c, const strategy::Cluster& cluster, int64_t stage, const StageBytes& b) {
  return c.zero == 1 || c.zero == 2 ? CollectiveSeconds(cluster, Collective::kAllGather, b.params, ShardGroup(c, stage))
                                    : 0.0;
}

// What pdist's engine leaves exposed of a stage's data-parallel synchronisation, once per step:
// the gradient sync behind the last backward — in a pipelined step too the engine starts each
// bucket once the last micro-batch has added its share (executor/pipeline_run.cc), so it
// overlaps that micro-batch's backward — then ZeRO 1 and 2's gather.
double EngineSyncSeconds(const Candidate& c, const strategy::Cluster& cluster, int64_t stage, const StageBytes& b,
                         double last_backward, const EstimateOptions& options) {
  return ExposedBehindBackward(GradientSyncSeconds(c, cluster, stage, b.grads), last_backward, b.layers, options) +
         ParameterGatherSeconds(c, cluster, stage, b);
}

// sharding.accumulate_shards (Candidate::ReducesEachMicroBatch): every backward job reduce-scatters
// its chunk's gradients behind itself, so what each leaves exposed joins that job (the schedule
// simulation places it); returns that over the step's micro-batches.
double ExposeInEachBackward(const Candidate& c, const strategy::Cluster& cluster, int64_t stage,
                            std::vector<VirtualStage>& vs, const EstimateOptions& options) {
  // Split schedules make the weight gradients in W: their reduce-scatters hide behind it alone.
  const bool split = passes::ScheduleDefOf(c.schedule).splits_backward;
  double per_micro_batch = 0;
  for (int64_t chunk = 0; chunk < c.vpp; ++chunk) {
    JobCosts& jobs = vs[chunk * c.pp + stage].jobs;
    const VirtualStage& v = vs[chunk * c.pp + stage];
    const double exposed =
        ExposedBehindBackward(GradientSyncSeconds(c, cluster, stage, v.cost.grad_bytes),
                              split ? jobs.backward_weight : jobs.backward, static_cast<double>(v.layers), options);
    jobs.backward += exposed;
    jobs.backward_weight += exposed;  // split schedules: the weight gradients are made in W
    per_micro_batch += exposed;
  }
  return static_cast<double>(c.micro_batches) * per_micro_batch;
}

// FSDP's (EstimateOptions::fsdp_schedule): each micro-batch reduce-scatters its own gradients in
// the reduce dtype, none of it hidden.
double FsdpReduceSeconds(const Candidate& c, const strategy::Cluster& cluster, int64_t stage, const StageBytes& b,
                         const EstimateOptions& options) {
  const double bytes = b.elements * static_cast<double>(ir::DataTypeSize(options.fsdp_reduce_dtype));
  return static_cast<double>(c.micro_batches) *
         CollectiveSeconds(cluster, Collective::kReduceScatter, bytes, ShardGroup(c, stage));
}

// The data-parallel gradient synchronisation of each stage not hidden behind its last backward
// (bucketed by layer: all but the last bucket overlap it); added to the stage's optimizer job.
// ZeRO 2 and 3 reduce-scatter the gradients instead of all-reducing them — hybrid, over the shard
// group, then all-reduce the shard over its replicas; ZeRO 1 and 2 then all-gather the updated
// parameters over the shard group after the update, with nothing left to hide behind
// (passes/sharding.h: what runs).
// Published FSDP runs are priced with FSDP's schedule instead (FsdpReduceSeconds).
std::vector<double> ExposeDataParallelSync(const Candidate& c, const strategy::Cluster& cluster,
                                           std::vector<VirtualStage>& vs, const EstimateOptions& options) {
  std::vector<double> exposed(static_cast<size_t>(c.pp), 0.0);
  if (c.dp == 1) return exposed;
  for (int64_t stage = 0; stage < c.pp; ++stage) {
    StageBytes b;
    for (int64_t chunk = 0; chunk < c.vpp; ++chunk) {
      const VirtualStage& v = vs[chunk * c.pp + stage];
      b.grads += v.cost.grad_bytes;
      b.params += v.cost.param_bytes;
      b.elements += v.cost.param_elements;
      b.layers += static_cast<double>(v.layers);
    }
    VirtualStage& last = vs[stage];  // a stage's last backward is its chunk 0's
    if (options.fsdp_schedule && c.zero == 3) {
      exposed[stage] = FsdpReduceSeconds(c, cluster, stage, b, options);
      last.jobs.optimizer += exposed[stage];
    } else if (c.ReducesEachMicroBatch()) {
      const double gather = ParameterGatherSeconds(c, cluster, stage, b);
      exposed[stage] = ExposeInEachBackward(c, cluster, stage, vs, options) + gather;
      last.jobs.optimizer += gather;
    } else {
      exposed[stage] = EngineSyncSeconds(c, cluster, stage, b, last.jobs.backward, options);
      last.jobs.optimizer += exposed[stage];
    }
  }
  return exposed;
}

// Per stage: its work in one step (a lower bound on the step) split by kind, and its memory
// with one micro-batch in flight.
std::vector<StageTotals> SumStages(const Candidate& c, const std::vector<VirtualStage>& vs,
                                   const std::vector<double>& dp_exposed, const EstimateOptions& options) {
  // Each ZeRO state is split over the shard group: all of dp, or (hybrid) part of it.
  const double mb = static_cast<double>(c.micro_batches), shards = static_cast<double>(c.ShardRanks());
  std::vector<StageTotals> totals(static_cast<size_t>(c.pp));
  for (int64_t stage = 0; stage < c.pp; ++stage) {
    StageTotals& st = totals[stage];
    for (int64_t chunk = 0; chunk < c.vpp; ++chunk) {
      const VirtualStage& s = vs[chunk * c.pp + stage];
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
      st.memory.workspace = std::max(st.memory.workspace, s.workspace);
      st.largest_update = std::max(st.largest_update, s.cost.largest_update_bytes / shards);
    }
    st.gathers_parameters = c.dp > 1 && (c.zero == 1 || c.zero == 2);
    st.busy += vs[stage].jobs.optimizer;
    st.time.dp_comm += dp_exposed[stage];
    st.time.compute = st.busy - st.time.recompute - st.time.dp_comm - st.time.mp_comm;
    st.memory.optimizer_states /= shards;
    // Over several micro-batches the engine sums each gradient whole and reduce-scatters the sum
    // once, at the optimizer (executor/job_plan.h), unless it reduce-scatters each micro-batch's
    // and sums the shards (sharding.accumulate_shards): ZeRO 2 and 3 hold a slice of each
    // gradient with one micro-batch per step or with accumulated shards.
    const bool sliced_gradients = c.zero >= 2 && (c.micro_batches == 1 || c.accumulate_shards);
    const double whole_gradients = st.memory.gradients;
    if (sliced_gradients) st.memory.gradients /= shards;
    if (c.zero >= 3) st.memory.parameters /= shards;
    for (int64_t chunk = 0; chunk < c.vpp; ++chunk) {  // whole on every rank, all step
      st.memory.parameters += vs[chunk * c.pp + stage].cost.step_value_bytes;
      st.memory.gradients += vs[chunk * c.pp + stage].cost.step_sum_bytes;
    }
    // Two buckets in flight, each at most the bucket size, together at most the stage's whole
    // gradients (a model smaller than a bucket fills one bucket of its own size).
    st.bucket_bytes = c.dp > 1 ? std::min(2 * options.bucket_bytes, whole_gradients) : 0;
    st.buckets_at_first_backward = c.micro_batches == 1 || c.ReducesEachMicroBatch() ? st.bucket_bytes : 0;
    st.memory.workspace += st.bucket_bytes;
    // One chunk: its first backward starts with no gradient; ZeRO 2 and 3 may keep a slice of
    // each (above).
    if (c.vpp == 1) st.first_backward_peak = BackwardPeak(vs[stage], sliced_gradients ? 1 / shards : 1.0);
    if (c.vpp == 1 && c.micro_batches > 1 && !c.ReducesEachMicroBatch()) {
      st.later_backward_peak = LaterBackwardPeak(vs[stage]);
    }
    SettleTransients(st, InFlight{});
  }
  return totals;
}

struct Simulated {
  double makespan = 0;
  double without_p2p = 0;  // the same schedule with free sends
  std::vector<int64_t> peak_in_flight, alive_at_first_backward, alive_at_later_backwards;
  std::vector<double> peak_alive_bytes;
};

// Stage `stage`'s first job of `kind` (of chunk `chunk`; the optimizer's: any), or null.
const passes::SimulatedJob* FirstJob(const passes::SimulatedSchedule& sim, int64_t stage, ir::JobKind kind,
                                     int64_t chunk = 0) {
  for (const passes::SimulatedJob& j : sim.stages[static_cast<size_t>(stage)]) {
    if (j.job.kind == kind && (kind == ir::JobKind::kOptimizer || j.job.chunk == chunk)) return &j;
  }
  return nullptr;
}

// The messages a pipeline sends once per step, outside the micro-batches' sends the schedule
// prices (passes/partition.h's prologue, passes/stage_gradient_sums.h): a parameter's copy that
// the prologue sends at the step's start to a stage that also reads it (a tied table to the
// head's), which that stage waits for at its first forward of the chunk reading it; and that
// stage's summed share of the parameter's gradient, sent back from its optimizer job, which the
// parameter's own stage waits for at its optimizer job. The parameter lives on the stage of its
// first reader: the first stage for a tied table, the only parameter shared between stages in
// the built-in models, and the stage priced here. What the schedule's slack does not hide
// lengthens the step: a late table delays the head's stage and what follows it; a late share,
// the first stage's update.
double OncePerStepDelay(const Candidate& c, const strategy::Cluster& cluster, const std::vector<VirtualStage>& vs,
                        const passes::SimulatedSchedule& sim) {
  double prologue_delay = 0, end = sim.makespan;
  const passes::SimulatedJob* first_update = FirstJob(sim, 0, ir::JobKind::kOptimizer);
  for (int64_t k = 0; k < c.pp * c.vpp; ++k) {
    const SegmentCost& cost = vs[static_cast<size_t>(k)].cost;
    const int64_t stage = k % c.pp;
    if (stage == 0) continue;  // the parameter's own stage: no message
    auto link = [&](double bytes) {
      return CollectiveSeconds(cluster, Collective::kSendRecv, bytes, {DeviceOf(c, stage, 0, 0), DeviceOf(c, 0, 0, 0)});
    };
    const passes::SimulatedJob* reader = FirstJob(sim, stage, ir::JobKind::kForward, k / c.pp);
    if (cost.step_value_bytes > 0 && reader != nullptr) {
      prologue_delay = std::max(prologue_delay, link(cost.step_value_bytes) - reader->start);
    }
    const passes::SimulatedJob* sender = FirstJob(sim, stage, ir::JobKind::kOptimizer);
    if (cost.step_sum_bytes > 0 && sender != nullptr && first_update != nullptr) {
      const double arrives = sender->start + link(cost.step_sum_bytes);
      end = std::max(end, std::max(first_update->start, arrives) + (first_update->end - first_update->start));
    }
  }
  return end - sim.makespan + prologue_delay;
}

absl::StatusOr<Simulated> SimulateJobs(const Candidate& c, const strategy::Cluster& cluster,
                                       const std::vector<VirtualStage>& vs) {
  const passes::ScheduleShape shape{.stages = c.pp, .micro_batches = c.micro_batches, .chunks = c.vpp};
  std::vector<std::vector<ir::PipelineJob>> per_stage;
  for (int64_t stage = 0; stage < c.pp; ++stage) {
    PDIST_ASSIGN_OR_RETURN(auto jobs, passes::BuildSchedule(c.schedule, shape, stage));
    per_stage.push_back(std::move(jobs));
  }
  std::vector<JobCosts> costs;
  for (const VirtualStage& s : vs) {
    costs.push_back(s.jobs);
    costs.back().activation_bytes = s.saved;
  }
  PDIST_ASSIGN_OR_RETURN(passes::SimulatedSchedule sim, passes::SimulateSchedule(per_stage, shape, costs));
  Simulated out{sim.makespan, sim.makespan, sim.peak_in_flight, sim.alive_at_first_backward,
                sim.alive_at_later_backwards, sim.peak_alive_bytes};
  if (c.pp > 1) {
    out.makespan += OncePerStepDelay(c, cluster, vs, sim);  // counted in pp_comm with the rest
    for (JobCosts& j : costs) j.p2p = 0;
    PDIST_ASSIGN_OR_RETURN(passes::SimulatedSchedule free_sends, passes::SimulateSchedule(per_stage, shape, costs));
    out.without_p2p = free_sends.makespan;
  }
  return out;
}

// Ranks that are threads sharing a node's cores: the node's compute over the ranks its cores
// run at full speed at once, when that exceeds the simulated step. Time in collectives is not
// counted: a rank waiting for its peers leaves its core to the others. Where the node holds more
// ranks than run at once, the cores are time-sliced at the measured efficiency.
void ShareCores(const Candidate& c, const strategy::Cluster& cluster, const std::vector<StageTotals>& totals,
                Estimate& e) {
  if (cluster.shared_cores <= 0) return;
  const int64_t threads_per_rank = std::max<int64_t>(1, cluster.shared_cores / cluster.devices_per_node);
  const int64_t at_once = std::min(cluster.devices_per_node, std::max<int64_t>(1, cluster.shared_cores / threads_per_rank));
  double work = 0;
  for (const StageTotals& st : totals) work += (st.time.compute + st.time.recompute) * static_cast<double>(c.dp * c.mp);
  const bool sliced = cluster.devices_per_node > at_once;
  const double contended = work / static_cast<double>(cluster.nodes) / static_cast<double>(at_once) /
                           (sliced ? cluster.shared_cores_efficiency : 1.0);
  if (contended > e.step_time) {
    e.time.core_sharing = contended - e.step_time;
    e.step_time = contended;
  }
}

}  // namespace

// From the smallest micro-batch whose profile builds: a model that cannot be cut into
// micro-batches of one sample (a reshape that folds the batch into another axis) is priced by the
// micro-batches it can run, down to the whole batch.
absl::StatusOr<double> ModelFlopsPerStep(const PlannedModel& model, Profiler& profiler) {
  absl::Status first_error = absl::OkStatus();
  for (int64_t b = 1; b <= model.global_batch; ++b) {
    if (model.global_batch % b != 0) continue;
    absl::StatusOr<const ModelProfile*> p = profiler.Get({.mp = 1, .sp = false, .micro_batch = b});
    if (!p.ok()) {
      if (first_error.ok()) first_error = p.status();
      continue;
    }
    double flops = 0;
    for (const ProgramSegment& s : model.segments) flops += (*p)->Of(s).model_flops;
    return flops * static_cast<double>(model.global_batch / b);
  }
  if (first_error.ok()) {  // no micro-batch was tried: an OK status is no StatusOr (it aborted)
    return absl::InvalidArgumentError(absl::StrCat("a batch of ", model.global_batch, " has no micro-batches"));
  }
  return first_error;
}

absl::StatusOr<Estimate> EstimateCandidate(const Candidate& c, const PlannedModel& model,
                                           const strategy::Cluster& cluster, Profiler& profiler,
                                           const EstimateOptions& options, double beat) {
  PDIST_RETURN_IF_ERROR(CheckShape(c, model, cluster));
  PDIST_ASSIGN_OR_RETURN(const ModelProfile* profile, profiler.Get({.mp = c.mp, .sp = c.sp, .micro_batch = c.micro_batch}));
  // Recompute's memory as the pass leaves it (planner/profile.h). Not under a split backward
  // (ZBH1): B replays the segment, and its W, run later to fill bubbles, still reads the replayed
  // inputs of the weight GEMMs, which then live from B to W where recompute freed them from F to
  // B. Measured (a user probe, session 31): the peak with recompute equals the peak without, so
  // its memory is priced as without; its time is the replay's all the same.
  const ModelProfile* replayed = nullptr;
  if (c.recompute != Recompute::kNone && !passes::ScheduleDefOf(c.schedule).splits_backward) {
    PDIST_ASSIGN_OR_RETURN(replayed, profiler.Get({.mp = c.mp, .sp = c.sp, .micro_batch = c.micro_batch,
                                                   .recompute = c.recompute}));
  }
  PDIST_ASSIGN_OR_RETURN(StageLayout layout, LayoutStages(*profile, model, c.pp * c.vpp,
                                                           options.stage_cut ? &*options.stage_cut : nullptr));
  Estimate e;
  e.candidate = c;
  e.split_before = layout.split_before;
  e.capacity = cluster.device.memory * (1 - options.memory_margin);

  std::vector<VirtualStage> vs;
  for (int64_t k = 0; k < c.pp * c.vpp; ++k) {
    vs.push_back(PriceVirtualStage(c, model, *profile, replayed, layout.stages[k], k, cluster, options.fsdp_schedule));
  }
  const std::vector<double> dp_exposed = ExposeDataParallelSync(c, cluster, vs, options);
  std::vector<StageTotals> totals = SumStages(c, vs, dp_exposed, options);

  // Bounds before the simulation: the busiest rank's work, the memory with one micro-batch.
  double busiest = 0;
  for (const StageTotals& st : totals) {
    if (st.busy > busiest) {
      busiest = st.busy;
      e.time = st.time;  // the busiest rank's terms; the simulation below adds the bubble and p2p
    }
    if (st.memory.total() > e.memory.total()) e.memory = st.memory;
  }
  if (busiest > beat || (options.prune_by_memory && e.memory.total() > e.capacity)) {
    e.simulated = false;
    e.step_time = busiest;
    e.pruned = busiest > beat ? absl::StrCat("slower: its busiest rank alone works ", busiest, " s")
                              : absl::StrCat("out of memory: needs at least ", e.memory.total(), " bytes");
    return e;
  }

  PDIST_ASSIGN_OR_RETURN(Simulated sim, SimulateJobs(c, cluster, vs));
  e.step_time = sim.makespan;
  e.memory = {};
  double busiest_seen = -1;
  for (int64_t stage = 0; stage < c.pp; ++stage) {
    StageTotals& st = totals[stage];
    SettleTransients(st, InFlight{.peak = static_cast<double>(sim.peak_in_flight[stage]),
                                  .at_first_backward = static_cast<double>(sim.alive_at_first_backward[stage]),
                                  .at_later_backwards = static_cast<double>(sim.alive_at_later_backwards[stage]),
                                  .peak_bytes = sim.peak_alive_bytes[stage]});
    if (st.busy > busiest_seen) {
      busiest_seen = st.busy;
      e.time = st.time;
      e.time.pp_comm = sim.makespan - sim.without_p2p;
      e.time.bubble = sim.without_p2p - st.busy;
    }
    if (st.memory.total() > e.memory.total()) e.memory = st.memory;
  }
  ShareCores(c, cluster, totals, e);
  e.fits = e.memory.total() <= e.capacity;
  // Every plan is one the engine runs: a candidate it would refuse is the planner's bug.
  if (absl::Status s = passes::CheckExecutable(c.ToStrategy(e.split_before)); !s.ok()) {
    return absl::InternalError(absl::StrCat(c.ToString(), ": the engine would refuse it: ", s.message()));
  }
  PDIST_ASSIGN_OR_RETURN(double flops, ModelFlopsPerStep(model, profiler));
  e.tokens_per_s = static_cast<double>(model.global_batch * model.seq_len) / e.step_time;
  e.tflops_per_device = flops / e.step_time / static_cast<double>(c.devices()) / 1e12;
  absl::StatusOr<double> peak = cluster.PeakFlops(model.dtype);
  e.mfu = peak.ok() ? e.tflops_per_device * 1e12 / *peak : 0;
  return e;
}

}  // namespace pdist::planner
