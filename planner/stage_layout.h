// Stage layout: which segments of the model (planner/program_segments.h: the embedding, layers,
// the head, or whatever the graph has) each virtual pipeline stage holds, chosen so that the
// slowest stage (F + B + W of one micro-batch, as profiled) is as fast as it can be, and the
// `pipeline.split_before` marks that make the engine cut exactly there.
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
    int64_t begin = 0, end = 0;  // model.segments[begin, end)
  };
  std::vector<Segments> stages;           // per virtual stage
  std::vector<std::string> split_before;  // virtual_stages - 1 marks
};

// InvalidArgument when there are more virtual stages than segments.
absl::StatusOr<StageLayout> LayoutStages(const ModelProfile& profile, const PlannedModel& model, int64_t virtual_stages);

// The same on bare weights: contiguous, non-empty groups of `weights` minimising the largest
// group sum; returns each group's first index.
std::vector<int64_t> BalancedGroups(const std::vector<double>& weights, int64_t groups);

}  // namespace pdist::planner
