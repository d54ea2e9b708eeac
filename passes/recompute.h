// Recompute (activation checkpointing; Chen et al. 2016, Megatron-LM's full and selective
// recompute, Korthikanti et al. 2022): forward ops cloned into the backward so that the
// activations they made need not live from the forward to the backward.
//
//   full — the forward is cut into one segment per layer: the layers are the longest run of
//   identical pieces between the cuts where the fewest values cross (passes/repeated_pieces.h;
//   in a pre-norm transformer those cuts fall twice per layer, on both residual streams), so a
//   segment keeps its layer's input, as Megatron-LM's full recompute does; what precedes the
//   layers (the embedding) and what follows them (the head) are a segment each. Where nothing
//   repeats, every such cut starts a segment. Each segment keeps the values that cross into the
//   next one and replays the rest just before the first backward op that needs it:
//
//     %5 = layer_norm(%4) ...                  %5 = layer_norm(%4) ...         (freed after the forward)
//     %6 = matmul(%5, %w) ...                  %6 = matmul(%5, %w) ...
//     ...                                →     ...
//     %30 = matmul_grad(%5, %w, %29)           %40 = layer_norm(%4) @backward  (replayed)
//                                              %41 = matmul(%40, %w) @backward
//                                              %30 = matmul_grad(%40, %w, %29)
//
//   selective — the results of compute-bound ops (OpDef::compute_bound: matmul, attention) are
//   kept too; only the cheap ops between them (norms, activations, dropout, views) are replayed.
//
// A replayed op is a copy with the same attributes and operands, so it computes the same bits:
// dropout draws its mask from (seed, position, micro-batch), not from the op's identity. Copies
// run with role backward in the chunk of their original and carry its DistAttr, so the pass can
// run before or after completion. A segment never spans two chunks or a reshard, and what a
// reshard to another mesh (a pipeline send) delivers is kept, never replayed: the receiving
// stage holds it as it would without recompute (a tied embedding's weight on the last stage).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "ir/program.h"

namespace pdist::passes {

enum class RecomputeGranularity { kFull, kSelective };
absl::StatusOr<RecomputeGranularity> ParseRecomputeGranularity(const std::string& name);  // full | selective
const char* RecomputeGranularityName(RecomputeGranularity granularity);

// What full recompute replays as one piece (selective always cuts at the finest):
//   kLayers — one repeated layer (the default, above);
//   kStages — a whole pipeline stage (chunk): the planner's profiles, whose stages are one layer
//     each (planner/profile.h), ask for this so that a one-layer stage replays as a layer of
//     the whole model does;
//   kFinest — every cut where the fewest values cross (two per pre-norm transformer layer).
enum class RecomputeSegments { kFinest, kLayers, kStages };
absl::StatusOr<RecomputeSegments> ParseRecomputeSegments(const std::string& name);  // layers | stages | finest
const char* RecomputeSegmentsName(RecomputeSegments segments);

struct RecomputeReport {
  int64_t segments = 0;        // segments with something to replay
  int64_t ops_replayed = 0;    // forward ops copied into the backward
  int64_t values_dropped = 0;  // forward values the backward no longer reads
  int64_t bytes_dropped = 0;   // their bytes (global shapes): what no longer lives until the backward
};

// Needs a program with a backward (run autodiff first: FailedPrecondition otherwise). A program
// whose backward reads no forward value made by a replayable op is left as it is.
absl::StatusOr<RecomputeReport> ApplyRecompute(ir::Program& program, RecomputeGranularity granularity,
                                               RecomputeSegments segments = RecomputeSegments::kLayers);

}  // namespace pdist::passes
