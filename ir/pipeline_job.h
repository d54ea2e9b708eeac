// The vocabulary of pipelined execution, shared by the passes that tag and schedule a program
// and by the executor that runs it.
//
// Every op of a training program has a role (forward, backward, optimizer) and a model chunk
// (the virtual pipeline stage it belongs to, divided by the number of stages: 0 without
// interleaving). A pipeline job runs the ops of one (role, chunk) for one micro-batch; a step is
// a list of jobs per rank, ending with the optimizer job (and, before them all, the ops of role
// prologue, which every rank runs first, once):
//
//   1F1B, 2 stages, 4 micro-batches, stage 0:  F0 F1 B0 F2 B1 F3 B2 B3 O
//   ZBH1 splits a backward into B (input gradients, sent upstream at once) and W (weight
//   gradients, deferred into the bubbles):    F0 F1 B0 W0 F2 B1 W1 ...
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace pdist::ir {

enum class OpRole : int8_t {
  kForward = 0,
  kBackward = 1,        // gradients of activations (and of weights, unless split off)
  kBackwardWeight = 2,  // ops that only compute weight gradients (zero-bubble schedules)
  kOptimizer = 3,       // runs once per step, on gradients accumulated over micro-batches
  // Runs once per step before every micro-batch, on parameters only; what it makes every
  // micro-batch reads (a tied embedding's table sent to the last stage: once, not per micro-batch).
  kPrologue = 4,
};
// "forward", "backward", "backward_weight", "optimizer", "prologue"
const char* OpRoleName(OpRole role);
// Optimizer or prologue: an op that runs once per step, outside the micro-batches' jobs.
inline bool IsOncePerStepRole(OpRole role) { return role == OpRole::kOptimizer || role == OpRole::kPrologue; }
// Where a role's ops run in a step, earliest first: prologue, forward, backward,
// backward_weight, optimizer (the enum's numbers keep model.pb's meaning, not this order).
inline int StepOrderOf(OpRole role) { return role == OpRole::kPrologue ? -1 : static_cast<int>(role); }
// Backward or backward_weight: a gradient op, whether or not the zero-bubble split took it to W.
inline bool IsBackwardRole(OpRole role) { return role == OpRole::kBackward || role == OpRole::kBackwardWeight; }
// The inverse of OpRoleName; nullopt for any other text.
std::optional<OpRole> ParseOpRole(std::string_view name);

enum class JobKind : int8_t {
  kForward = 0,         // F: ops of role forward
  kBackward = 1,        // B: ops of role backward and backward_weight
  kBackwardInput = 2,   // B of a split backward (ZBH1): ops of role backward only
  kBackwardWeight = 3,  // W: ops of role backward_weight
  kOptimizer = 4,       // O: ops of role optimizer, once per step
};
const char* JobKindName(JobKind kind);  // "forward", "backward", "backward_input", "backward_weight", "optimizer"

struct PipelineJob {
  JobKind kind = JobKind::kForward;
  int64_t micro_batch = 0;  // 0 for the optimizer job
  int64_t chunk = 0;        // model chunk on this rank (0 … vpp_degree-1); 0 for the optimizer

  // "F3" (micro-batch 3), "B0", "W2", "O"; with a chunk other than 0: "F3.1" (chunk 1).
  // A split backward's input part prints "B" like the whole backward: the schedule says which.
  std::string ToString() const;
  friend bool operator==(const PipelineJob&, const PipelineJob&) = default;
};

}  // namespace pdist::ir
