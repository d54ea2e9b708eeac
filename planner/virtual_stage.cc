#include "planner/virtual_stage.h"

#include <algorithm>

#include "planner/comm_cost.h"
#include "passes/schedules/schedule_def.h"

namespace pdist::planner {

using ir::OpRole;

int64_t DeviceOf(const Candidate& c, int64_t stage, int64_t d, int64_t t) { return (stage * c.dp + d) * c.mp + t; }

std::vector<int64_t> DataParallelGroup(const Candidate& c, int64_t stage) {
  std::vector<int64_t> group;
  for (int64_t d = 0; d < c.dp; ++d) group.push_back(DeviceOf(c, stage, d, 0));
  return group;
}

VirtualStage PriceVirtualStage(const Candidate& c, const ModelProfile& profile, const StageLayout::Segments& seg,
                               int64_t k, const strategy::Cluster& cluster) {
  VirtualStage s;
  const int64_t stage = k % c.pp;
  const double n = static_cast<double>(seg.layers);
  const double boundary = profile.layer.boundary_bytes;
  s.layers = seg.layers;
  s.cost = profile.layer * n;
  if (seg.embedding) s.cost += profile.embedding;
  if (seg.head) s.cost += profile.head;
  switch (c.recompute) {
    case Recompute::kNone: s.saved = s.cost.saved_bytes; break;
    case Recompute::kSelective:
      s.recompute = n * profile.layer.recomputable_seconds;
      s.saved = s.cost.saved_bytes - n * profile.layer.recomputable_bytes;
      break;
    case Recompute::kFull:  // keeps each layer's input only
      s.recompute = n * profile.layer.Seconds(OpRole::kForward);
      s.saved = s.cost.saved_bytes - n * (profile.layer.saved_bytes - boundary);
      break;
  }
  if (c.zero == 3 && c.dp > 1) {
    const double gather =
        CollectiveSeconds(cluster, Collective::kAllGather, s.cost.param_bytes, DataParallelGroup(c, stage));
    // Prefetched one segment ahead: hidden behind the job except the first segment's share
    // and whatever exceeds the job's compute.
    const double segments = std::max(1.0, n + (seg.embedding ? 1 : 0) + (seg.head ? 1 : 0));
    s.gather = gather / segments + std::max(0.0, gather - s.cost.Seconds(OpRole::kForward));
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
  s.jobs.optimizer = s.cost.Seconds(OpRole::kOptimizer) / (c.zero > 0 ? static_cast<double>(c.dp) : 1.0);
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
