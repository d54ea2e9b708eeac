// What one micro-batch of one pipeline segment costs one rank: the time of its ops by role
// (forward, backward, backward_weight, optimizer), its persistent state and the activations it
// keeps for the backward — measured on a partitioned local program (planner/profile.h) and
// combined by addition: a stage of 12 layers and the head is 12 · layer + head.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "ir/pipeline_job.h"
#include "ir/program.h"
#include "strategy/cluster.h"

namespace pdist::planner {

struct SegmentCost {
  // Seconds by ir::OpRole (forward, backward, backward_weight, optimizer — the prologue's, once
  // per step too, counted with the optimizer's): compute and the tensor-parallel collectives
  // inside the ops' own program order.
  std::array<double, 4> seconds{};
  std::array<double, 4> mp_comm_seconds{};  // of which collectives
  double flops = 0;        // forward + backward FLOPs the kernels perform
  double model_flops = 0;  // forward + backward FLOPs as MFU credits them (ir::OpCost::model_flops)
  double param_bytes = 0;                   // local, as the program holds them
  double param_elements = 0;
  double grad_bytes = 0;
  double optimizer_state_bytes = 0;
  double saved_bytes = 0;           // forward values (and fed inputs) a backward op reads
  double recomputable_seconds = 0;  // forward seconds of the ops that are not compute-bound (what selective recompute redoes)
  double boundary_bytes = 0;          // what a forward sends to the next stage (c_send)
  // Held whole for the whole step, whatever ZeRO does: what the prologue receives for every
  // micro-batch (a tied table's copy on the last stage), and the sums of gradient shares sent
  // to another stage once per step (the head's share of that table's gradient).
  double step_value_bytes = 0;
  double step_sum_bytes = 0;
  // Of saved_bytes, what an unfused attention core keeps beyond the fused op's results (priced
  // for devices that run attention unfused: UnfusedAttentionSavedBytes).
  double unfused_attention_bytes = 0;
  // The most bytes its backward holds at once beyond the saved values it starts with (it frees
  // them as it goes, op by op as the executor does): activation gradients and recompute's
  // replayed forward. Parameter gradients are grad_bytes. One segment's backward runs at a
  // time: combined by max, not sum, and left alone by scaling.
  double backward_excess_bytes = 0;
  // The same walk with its parameter gradients counted as they appear: the most of the excess
  // plus the gradient bytes made so far. At most backward_excess_bytes + grad_bytes, and less
  // where the replay and activation gradients drain while the gradients fill (a layer's weight
  // gradients appear as its activations go). Combined by max, left alone by scaling.
  double backward_excess_with_grads_bytes = 0;
  // The same walk in a later micro-batch's backward, whose gradients join whole sums right after
  // the op that makes them (executor.cc Accumulate): that op's fresh gradients and their new sums
  // live beside the old sums for a moment, twice their bytes on top of the excess then. Combined
  // by max, left alone by scaling.
  double backward_excess_accumulating_bytes = 0;
  // The most bytes one optimizer op makes (a parameter's new value and new states): what the
  // executor holds beside the old tensors before it installs them (an in-place update). Combined
  // by max, not sum, and left alone by scaling.
  double largest_update_bytes = 0;

  double Seconds(ir::OpRole role) const { return seconds[Slot(role)]; }
  double MpCommSeconds(ir::OpRole role) const { return mp_comm_seconds[Slot(role)]; }
  // The slot of seconds[] a role's time goes to: the prologue's, once per step, the optimizer's.
  static size_t Slot(ir::OpRole role) {
    return static_cast<size_t>(role == ir::OpRole::kPrologue ? ir::OpRole::kOptimizer : role);
  }

  SegmentCost& operator+=(const SegmentCost& o);
  SegmentCost& operator*=(double k);
  friend SegmentCost operator+(SegmentCost a, const SegmentCost& b) { return a += b; }
  friend SegmentCost operator*(SegmentCost a, double k) { return a *= k; }
};

// Prices every op of a rank's local (partitioned) program on `cluster`'s device. Collectives of
// n ranks are priced as a group of n devices inside one node (tensor parallelism's place);
// c_send / c_recv are not priced here, the forward sends' bytes become boundary_bytes (and the
// prologue's receives and the optimizer job's sends of gradient sums, step_value_bytes and
// step_sum_bytes: memory here, their once-per-step time priced against the schedule by
// estimate.cc's OncePerStepDelay).
// A compute op's time is multiplied by the device's op_scale for its type (and dtype:
// OpScaleOf); `unscaled_by_type`, when given, receives the compute seconds per OpScaleKey before
// that (what calibration compares).
absl::StatusOr<SegmentCost> PriceLocalProgram(const ir::Program& local, const strategy::Cluster& cluster,
                                              std::map<std::string, double>* unscaled_by_type = nullptr);

}  // namespace pdist::planner
