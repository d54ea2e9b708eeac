// Stage layout: which segments of the model (planner/program_segments.h: the embedding, layers,
// the head, or whatever the graph has) each virtual pipeline stage holds, chosen so that the
// slowest stage (F + B + W of one micro-batch, as profiled) is as fast as it can be, and the
// `pipeline.split_before` marks that make the engine cut exactly there.
//
//   4 layers, 2 stages, a heavy head:  stage 0 = embedding + layers 0-2, stage 1 = layer 3 + head
//   split_before = {"gpt.h.3.*"}
//
// Or the cut a strategy file fixes (`pdist-plan --strategy plan.json`, a plan's own -o file):
// its marks are found among the segments' starts, and the stages priced as cut there.
//
//   PDIST_ASSIGN_OR_RETURN(StageCut cut, StageCutFromMarks(model, {"gpt.h.3.*"}));
//   LayoutStages(profile, model, 2, &cut)   // stage 0 = segments [0, 4), stage 1 = [4, 6)
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

// A stage cut given as `pipeline.split_before` marks: the segment each virtual stage after the
// first starts at, and the marks as given (a plan writes them back unchanged).
struct StageCut {
  std::vector<int64_t> starts;  // model.segments index per mark, increasing
  std::vector<std::string> marks;
};

// InvalidArgument naming the mark that starts no segment: one that matches no argument, lists
// the stages out of order, or cuts inside a segment (the planner prices whole segments; the
// message lists the marks it can cut at). A model.pb's marks are any patterns its forward
// resolves as the engine does (passes/pipeline_stages.h); a spec's are its segments' own marks.
absl::StatusOr<StageCut> StageCutFromMarks(const PlannedModel& model, std::vector<std::string> marks);

// InvalidArgument when there are more virtual stages than segments, or when `cut` is given and
// makes another number of stages.
absl::StatusOr<StageLayout> LayoutStages(const ModelProfile& profile, const PlannedModel& model, int64_t virtual_stages,
                                         const StageCut* cut = nullptr);

// The same on bare weights: contiguous, non-empty groups of `weights` minimising the largest
// group sum; returns each group's first index.
std::vector<int64_t> BalancedGroups(const std::vector<double>& weights, int64_t groups);

}  // namespace pdist::planner
