// Stage layout: which segments (the embedding, layers, the head) each virtual pipeline stage
// holds, chosen so that the slowest stage (F + B + W of one micro-batch) is as fast as it can
// be, and the `pipeline.split_before` marks that make the engine cut exactly there.
//
//   4 layers, 2 stages, a heavy head:  stage 0 = embedding + layers 0-2, stage 1 = layer 3 + head
//   split_before = {"gpt.h.3.*"}
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "planner/planned_model.h"
#include "planner/profile.h"

namespace pdist::planner {

struct StageLayout {
  struct Segments {
    bool embedding = false;
    int64_t first_layer = 0;
    int64_t layers = 0;
    bool head = false;
  };
  std::vector<Segments> stages;           // per virtual stage
  std::vector<std::string> split_before;  // virtual_stages - 1 marks
};

// InvalidArgument when there are more virtual stages than segments (layers + 2).
absl::StatusOr<StageLayout> LayoutStages(const ModelProfile& profile, const PlannedModel& model, int64_t virtual_stages);

// The same on bare weights: contiguous, non-empty groups of `weights` minimising the largest
// group sum; returns each group's first index.
std::vector<int64_t> BalancedGroups(const std::vector<double>& weights, int64_t groups);

}  // namespace pdist::planner
