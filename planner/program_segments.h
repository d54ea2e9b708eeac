// Program segments: a forward program cut into the pieces the planner prices and the pipeline
// stages are made of, found from the graph alone — no naming convention.
//
// Cut points are where the fewest values cross (passes/pipeline_stages.h's CrossingValues: the
// residual stream between transformer blocks) at an op that is the first reader of some
// argument, so that `pipeline.split_before` can name the cut ("blocks.7.norm.w"). The pieces
// between cuts are compared by what they compute (passes/repeated_pieces.h, which full
// recompute uses to find the same layers): op types, attributes (a dropout's seed aside),
// result types and where each operand comes from. The longest run of identical blocks
// of pieces is the model's repeated layers; what precedes it is one prologue segment (the
// embedding), what follows one epilogue segment (the head and loss):
//
//   GPT, 2 layers, pieces of half a layer:   [emb][attn mlp][attn mlp][ln_f head loss]
//   segments                                  prologue  layer 0  layer 1  epilogue
//
// A program without repetition (an MLP of different widths) is cut at every cut point, each
// piece a segment of its own kind, merged by forward FLOPs when there are more than the most
// asked for. Segments of one kind cost the same: the profiler measures each kind once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/program.h"

namespace pdist::planner {

struct ProgramSegment {
  int64_t first_op = 0;  // index in the forward's op list
  int64_t kind = 0;      // segments of one kind compute the same thing on the same shapes
  std::string mark;      // the pipeline.split_before pattern that starts it; empty for the first
  bool layer = false;    // one of the repeated layers (every segment, when nothing repeats)
};

struct ProgramSegments {
  std::vector<ProgramSegment> segments;
  int64_t layers = 0;  // repeated layers; 0 when nothing repeats
  int64_t kinds = 0;
  std::string summary;  // "12 repeated layers of 17 ops; 2 ops before, 5 ops after"
};

// InvalidArgument for a program with no ops. `max_segments` bounds the segments of a program
// without repetition (each becomes a profiled pipeline stage).
absl::StatusOr<ProgramSegments> FindProgramSegments(const ir::Program& forward, int64_t max_segments = 32);

}  // namespace pdist::planner
