// Pipeline stages: a forward program cut into `pp_degree × vpp_degree` virtual stages, each on
// its stage's sub-mesh, with every value that crosses a cut moved by an explicit `reshard`.
//
//   pp 2, dp 1, mp 2 (ranks 0,1 = stage 0; ranks 2,3 = stage 1), GPT with 4 layers:
//     embedding, layers 0-1       chunk 0 on mesh [1,2] ids [0,1]
//     %90 = reshard(%89)          the residual stream, to mesh [1,2] ids [2,3] (same placements)
//     layers 2-3, norm, head      chunk 0 on mesh [1,2] ids [2,3]
//
// Cuts go only where the fewest values cross (between layers: the residual stream), and are
// chosen so that the most expensive stage (by the ops' registered FLOPs, embedding and head
// included) is as cheap as possible. Virtual stage k belongs to stage k mod pp and is model chunk
// k / pp there (interleaved 1F1B, Megatron-LM). Within each stage the strategy's dp/mp/sp are
// planned as for a single stage (passes/annotate_from_strategy.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/dist/process_mesh.h"
#include "ir/program.h"
#include "strategy/strategy.h"

namespace pdist::passes {

// The FLOPs of one forward op as its OpDef prices them (0 for an op without a cost).
double ForwardFlops(const ir::Operation& op);

// crossing[c]: the values made before op c and read at or after it (c = 1 … n-1; crossing[0] is
// 0). Arguments do not count: every stage can read a parameter or a data input.
std::vector<int64_t> CrossingValues(const ir::Program& program);
// The same over `ops` alone (recompute: a program's forward ops); a value made by an op not in
// the list counts as an argument.
std::vector<int64_t> CrossingValues(const std::vector<const ir::Operation*>& ops);

// The virtual stage (0 … virtual_stages-1) of every op of `forward`, in program order, never
// decreasing. Errors name the number of places the program can be cut when there are too few.
absl::StatusOr<std::vector<int64_t>> BalanceStages(const ir::Program& forward, int64_t virtual_stages);

// The virtual stage of every op when the user marks where stages start: stage i + 1 begins at
// the first op that reads an argument whose name matches split_before[i] (passes/annotate.h's
// glob) — or a few ops earlier, where fewer values cross, if those read no argument (the f32
// cast before a layer norm under mixed precision). Errors name a pattern that matches nothing,
// or one that starts no later than the last.
absl::StatusOr<std::vector<int64_t>> StagesFromMarks(const ir::Program& forward,
                                                     const std::vector<std::string>& split_before);

struct PipelineStages {
  std::vector<ir::ProcessMesh> meshes;  // per stage: [dp, mp], ids stage·dp·mp …
  std::vector<double> flops;            // per virtual stage, forward
  int64_t boundary_reshards = 0;
};

// Annotates `forward` for the strategy's pp_degree × pipeline.vpp_degree virtual stages: sets
// each op's chunk, places arguments on the stage of their first reader, and inserts the
// boundary reshards. Fails for strategy annotations (per-tensor meshes) together with pp > 1.
absl::StatusOr<PipelineStages> AnnotatePipelineStages(const strategy::Strategy& strategy, ir::Program& forward);

}  // namespace pdist::passes
