// Candidate: one point of the search space — the degrees, the schedule, the micro-batching, ZeRO
// and recompute — and the Strategy JSON it becomes.
//
//   Candidate c{.dp = 4, .mp = 2, .pp = 2, .micro_batch = 2, .micro_batches = 8};
//   c.ToString()       // "dp4 mp2 pp2 1F1B m8 b2"
//   c.ToStrategy(model) // what pdist-train runs; stage cuts written as pipeline.split_before
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "passes/pipeline_schedule.h"
#include "strategy/strategy.h"

namespace pdist::planner {

enum class Recompute : int8_t { kNone, kSelective, kFull };
const char* RecomputeName(Recompute r);  // "none", "selective", "full"

struct Candidate {
  int64_t dp = 1, mp = 1, pp = 1;
  int64_t vpp = 1;  // model chunks per stage (VPP)
  bool sp = false;
  int64_t zero = 0;           // ZeRO stage along dp; 0: none
  int64_t zero_degree = 0;    // ranks a ZeRO shard group spans; 0: all of dp (below dp: hybrid)
  // ZeRO 2 and 3: each micro-batch's gradients reduce-scattered, the shards summed
  // (sharding.accumulate_shards); "acc-shards" in ToString.
  bool accumulate_shards = false;
  int64_t micro_batch = 1;    // sequences per micro-batch on one data-parallel rank
  int64_t micro_batches = 1;  // per step: global batch = dp · micro_batch · micro_batches
  passes::ScheduleMode schedule = passes::ScheduleMode::k1F1B;
  Recompute recompute = Recompute::kNone;

  int64_t devices() const { return dp * mp * pp; }
  // The ranks each ZeRO state is sharded over (1 without ZeRO): consecutive data-parallel ranks;
  // each shard has dp / ShardRanks() replicas, ShardRanks() data-parallel ranks apart.
  int64_t ShardRanks() const { return zero == 0 ? 1 : zero_degree > 0 ? zero_degree : dp; }
  bool HybridZero() const { return zero > 0 && ShardRanks() < dp; }
  // Whether a step reduce-scatters gradients in every backward rather than once: accumulated
  // shards with more than one micro-batch to accumulate.
  bool ReducesEachMicroBatch() const { return zero >= 2 && accumulate_shards && micro_batches > 1; }
  // How many features the plan switches on: the planner prefers the simpler of two equally
  // fast plans.
  int64_t Complexity() const;
  std::string ToString() const;
  // `split_before`: the stage marks (empty: let the engine balance the cut).
  strategy::Strategy ToStrategy(std::vector<std::string> split_before) const;
};

}  // namespace pdist::planner
