#include "planner/virtual_stage.h"

#include <algorithm>

#include "planner/comm_cost.h"
#include "passes/schedules/schedule_def.h"

namespace pdist::planner {

using ir::OpRole;

int64_t DeviceOf(const Candidate& c, int64_t stage, int64_t d, int64_t t) { return (stage * c.dp + d) * c.mp + t; }

namespace {

// The first tensor-parallel rank of data-parallel replicas 0, stride, 2·stride, ... below `end`.
std::vector<int64_t> Replicas(const Candidate& c, int64_t stage, int64_t end, int64_t stride) {
  std::vector<int64_t> group;
  for (int64_t d = 0; d < end; d += stride) group.push_back(DeviceOf(c, stage, d, 0));
  return group;
}

}  // namespace

std::vector<int64_t> DataParallelGroup(const Candidate& c, int64_t stage) { return Replicas(c, stage, c.dp, 1); }

std::vector<int64_t> ShardGroup(const Candidate& c, int64_t stage) { return Replicas(c, stage, c.ShardRanks(), 1); }

std::vector<int64_t> ShardReplicaGroup(const Candidate& c, int64_t stage) {
  return Replicas(c, stage, c.dp, c.ShardRanks());
}

namespace {

// What a stage sends forward (its last segment's boundary), or for the model's last stage what
// it receives; the link is the same either way.
double StageBoundary(const PlannedModel& model, const ModelProfile& profile, const StageLayout::Segments& seg) {
  const int64_t n = static_cast<int64_t>(model.segments.size());
  const int64_t at = seg.end < n ? seg.end - 1 : seg.begin - 1;
  return at < 0 ? 0.0 : profile.Of(model.segments[static_cast<size_t>(at)]).boundary_bytes;
}

}  // namespace

double BackwardPeak(const VirtualStage& s, double grad_scale) {
  const size_t n = s.segment_saved.size();
  double saved_below = 0;  // Σ_{i<j} saved_i
  std::vector<double> saved_through(n);
  for (size_t j = 0; j < n; ++j) {
    saved_below += s.segment_saved[j];
    saved_through[j] = saved_below;
  }
  double peak = 0, grads_above = 0;  // Σ_{i>j} grads_i
  for (size_t j = n; j-- > 0;) {
    // Segment j's own gradients appear while its workspace drains: the walk's peak with them
    // (segment_with_grads) at grad_scale 1, its peak without them at 0, and between the two a
    // bound on max_t(excess_t + grad_scale · grads_t): linear in grad_scale.
    const double own = (1 - grad_scale) * s.segment_workspace[j] + grad_scale * s.segment_with_grads[j];
    peak = std::max(peak, saved_through[j] + own + grads_above);
    grads_above += s.segment_grads[j] * grad_scale;
  }
  return peak;
}

double LaterBackwardPeak(const VirtualStage& s) {
  double saved_through = 0, peak = 0;
  for (size_t j = 0; j < s.segment_saved.size(); ++j) {
    saved_through += s.segment_saved[j];
    peak = std::max(peak, saved_through + s.segment_accumulating[j]);
  }
  return peak;
}

VirtualStage PriceVirtualStage(const Candidate& c, const PlannedModel& model, const ModelProfile& profile,
                               const ModelProfile* replayed, const StageLayout::Segments& seg, int64_t k,
                               const strategy::Cluster& cluster, bool fsdp_schedule) {
  VirtualStage s;
  const int64_t stage = k % c.pp;
  const double boundary = StageBoundary(model, profile, seg);
  s.segments = seg.end - seg.begin;
  double dropped = 0;  // activation bytes recompute frees
  for (int64_t i = seg.begin; i < seg.end; ++i) {
    const ProgramSegment& segment = model.segments[static_cast<size_t>(i)];
    const SegmentCost& cost = profile.Of(segment);
    s.cost += cost;
    if (segment.layer) {
      ++s.layers;
      // The replayed forward's time (the plain profile's, as validated against published runs).
      if (c.recompute == Recompute::kSelective) s.recompute += cost.recomputable_seconds;
      if (c.recompute == Recompute::kFull) s.recompute += cost.Seconds(OpRole::kForward);
    }
    // Its backward's workspace: what its activation gradients add to its saved values at most,
    // alone and with its parameter gradients as they appear.
    double segment_dropped = 0, segment_workspace = cost.backward_excess_bytes;
    double segment_with_grads = cost.backward_excess_with_grads_bytes;
    double segment_accumulating = cost.backward_excess_accumulating_bytes;
    if (replayed != nullptr) {
      // Its memory from what the pass made of this segment: the values it keeps (less an unfused
      // attention core's probabilities, which recompute replays: Korthikanti et al.'s selective
      // and full alike) and what its backward adds to them at most, replays and activation
      // gradients, the core's probabilities again while it runs.
      const SegmentCost& r = replayed->Of(segment);
      segment_dropped = cost.saved_bytes - (r.saved_bytes - r.unfused_attention_bytes);
      segment_workspace = r.backward_excess_bytes + r.unfused_attention_bytes;
      segment_with_grads = r.backward_excess_with_grads_bytes + r.unfused_attention_bytes;
      segment_accumulating = r.backward_excess_accumulating_bytes + r.unfused_attention_bytes;
    }
    dropped += segment_dropped;
    s.workspace = std::max(s.workspace, segment_workspace);
    s.segment_saved.push_back(cost.saved_bytes - segment_dropped);
    s.segment_workspace.push_back(segment_workspace);
    s.segment_with_grads.push_back(segment_with_grads);
    s.segment_accumulating.push_back(segment_accumulating);
    s.segment_grads.push_back(cost.grad_bytes);
  }
  s.saved = s.cost.saved_bytes - dropped;
  if (c.zero == 3 && c.dp > 1) {
    const double gather =
        CollectiveSeconds(cluster, Collective::kAllGather, s.cost.param_bytes, ShardGroup(c, stage));
    // Prefetched one segment ahead: hidden behind the job except the first segment's share
    // and whatever exceeds the job's compute. FSDP's, all of it.
    s.gather = fsdp_schedule ? gather
                             : gather / static_cast<double>(std::max<int64_t>(1, s.segments)) +
                                   std::max(0.0, gather - s.cost.Seconds(OpRole::kForward));
  }
  s.jobs.forward = s.cost.Seconds(OpRole::kForward) + s.gather;
  s.jobs.backward_input = s.cost.Seconds(OpRole::kBackward) + s.recompute + s.gather;
  s.jobs.backward_weight = s.cost.Seconds(OpRole::kBackwardWeight);
  if (passes::ScheduleDefOf(c.schedule).splits_backward && k == 0) {
    // The first stage sends no input gradients upstream: the engine's split gives its whole
    // backward to W (passes/split_weight_grad.h), which the schedule runs late to fill bubbles.
    s.jobs.backward_weight += s.jobs.backward_input;
    s.jobs.backward_input = 0;
  }
  s.jobs.backward = s.jobs.backward_input + s.jobs.backward_weight;
  s.jobs.optimizer = s.cost.Seconds(OpRole::kOptimizer) / static_cast<double>(c.ShardRanks());
  // A cross-stage dependency waits for a send from a neighbouring stage: the slower link.
  for (int64_t neighbour : {stage - 1, stage + 1}) {
    if (c.pp == 1) break;
    const int64_t other = (neighbour + c.pp) % c.pp;
    s.jobs.p2p = std::max(s.jobs.p2p, CollectiveSeconds(cluster, Collective::kSendRecv, boundary,
                                                        {DeviceOf(c, stage, 0, 0), DeviceOf(c, other, 0, 0)}));
  }
  return s;
}

}  // namespace pdist::planner
