// Strategy: how a program is parallelised, read from JSON whose section and key names follow
// Paddle's auto-parallel `strategy.py` (docs/strategy.md).
//
//   {"dp_degree": 2, "mp_degree": 2, "sp": true,
//    "pipeline": {"enable": true, "schedule_mode": "1F1B", "accumulate_steps": 4},
//    "sharding": {"enable": true, "stage": 2, "degree": 2},
//    "annotations": [{"tensor": "gpt.h.*.attn.qkv.weight",
//                     "mesh": {"shape": [2, 2], "dim_names": ["dp", "mp"]},
//                     "placements": ["Replicate()", "Shard(1)"]}]}
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/dist/placement.h"
#include "ir/dist/process_mesh.h"

namespace pdist::strategy {

struct ShardingConfig {
  bool enable = false;
  int64_t stage = 1;   // ZeRO stage 1, 2 or 3
  // Ranks one state is sharded over, along the data-parallel axis; 0 (the key left out): all of
  // dp_degree. pdist runs degree == dp_degree (a sub-axis of dp is refused by the engine).
  int64_t degree = 0;
  // Stages 2 and 3 under gradient accumulation (several micro-batches per step): reduce-scatter
  // each micro-batch's gradients as its backward makes them and sum the shards (DeepSpeed's
  // ZeRO-2, PyTorch FSDP without no_sync), so a rank holds 1/degree of the gradients, at
  // micro-batches × the reduce-scatter traffic; false (the default): sum whole gradients and
  // reduce-scatter the sum once per step. pdist's key.
  bool accumulate_shards = false;
};

struct PipelineConfig {
  bool enable = false;
  std::string schedule_mode = "1F1B";  // FThenB | 1F1B | VPP | ZBH1
  int64_t accumulate_steps = 1;        // micro-batches per step
  int64_t micro_batch_size = 1;
  int64_t vpp_degree = 1;
  // Stage boundaries marked by the user: the i-th virtual stage after the first starts at the
  // first op that reads a parameter matching split_before[i] ("gpt.h.6.*"); empty: cut where it
  // balances the stages. pdist's key (Paddle splits by a layer class, vpp_seg_method).
  std::vector<std::string> split_before;
};

// Recompute granularities (pdist's key, named as Megatron-LM's; Paddle picks ops by pattern):
// "full" keeps each layer's input and recomputes the whole layer in the backward; "selective"
// keeps what matmul-like ops (matmuls, fused attention) produce and recomputes the cheap rest
// (norms, activations, dropout) — with a fused attention there is no s² tensor to drop, so this
// is the selective policy that still saves memory.
struct RecomputeConfig {
  bool enable = false;
  std::string granularity = "full";  // full | selective
  // What full recompute replays as one piece (passes/recompute.h): "layers" (each repeated
  // layer, found from the graph), "stages" (each pipeline stage's chunk whole: the planner's
  // one-layer profile stages) or "finest" (every residual-stream cut). pdist's key.
  std::string segments = "layers";
};

// Mixed precision (passes/amp.h). Dynamic loss scaling applies to float16 only (bfloat16 has
// f32's exponent range: its gradients do not underflow); its keys and defaults are Paddle's.
struct AmpConfig {
  bool enable = false;
  std::string dtype = "float16";  // float16 | bfloat16
  std::string level = "o1";
  bool use_dynamic_loss_scaling = true;
  double init_loss_scaling = 32768.0;
  int64_t incr_every_n_steps = 1000;
  int64_t decr_every_n_nan_or_inf = 2;
  double incr_ratio = 2.0;
  double decr_ratio = 0.5;
  // Paddle's custom lists: op types that run in low precision (white) or in f32 (black),
  // overriding the built-in lists (passes/amp.h). Each names a registered op, none both lists.
  std::vector<std::string> custom_white_list;
  std::vector<std::string> custom_black_list;

  bool ScalesLoss() const { return enable && dtype == "float16" && use_dynamic_loss_scaling; }
};

struct GradientMergeConfig {
  bool enable = false;
  int64_t k_steps = 1;
  bool avg = true;
};

// A user's shard_tensor, written in the strategy: every block argument whose name matches
// `tensor` gets `placements` (one per mesh dim) on `mesh`. In `tensor`, `*` matches any run of
// characters, dots included: "gpt.h.*.mlp.up.weight". passes/annotate.h applies them.
struct TensorAnnotation {
  std::string tensor;
  ir::ProcessMesh mesh;
  std::vector<ir::Placement> placements;

  friend bool operator==(const TensorAnnotation&, const TensorAnnotation&) = default;
};

struct Strategy {
  int64_t dp_degree = 1;
  int64_t mp_degree = 1;
  int64_t pp_degree = 1;
  bool sp = false;  // sequence parallel (needs mp_degree > 1)
  ShardingConfig sharding;
  PipelineConfig pipeline;
  RecomputeConfig recompute;
  AmpConfig amp;
  GradientMergeConfig gradient_merge;
  std::vector<TensorAnnotation> annotations;  // in the order given; see ApplyAnnotations

  // Ranks the strategy needs: dp × mp × pp.
  int64_t WorldSize() const { return dp_degree * mp_degree * pp_degree; }
  // Micro-batches per step: gradient_merge.k_steps when gradient merge is on, else
  // pipeline.accumulate_steps (Paddle's Engine couples them the same way). Gradient merge is
  // accumulation over micro-batches cut from the step's batch, run without a pipeline.
  int64_t MicroBatches() const { return gradient_merge.enable ? gradient_merge.k_steps : pipeline.accumulate_steps; }
  // Whether a step runs as micro-batches (a pipeline schedule, possibly of one stage).
  bool MicroBatched() const { return pp_degree > 1 || MicroBatches() > 1; }
};

// What a key the JSON leaves out means to the checks between keys.
enum class StrategyKeys : int8_t {
  kAbsentAreDefaults,  // a strategy to run: an absent key is its default (dp_degree 1)
  // Choices fixed for the planner (`pdist-plan --strategy`): an absent key is the search's, so a
  // check that reads it does not run ("sharding.degree": 2 alone is no error).
  kGivenOnly,
};

// Parses and validates; an unknown key, a wrong type or an impossible value is an
// InvalidArgument error naming the key path ("pipeline.schedule_mode",
// "annotations[0].placements[1]").
absl::StatusOr<Strategy> ParseStrategy(const std::string& json_text,
                                       StrategyKeys keys = StrategyKeys::kAbsentAreDefaults);
std::string StrategyToJson(const Strategy& strategy);

// The JSON text a tool's --strategy argument gives: the argument itself when it is inline JSON
// (its first non-blank character is '{' or '[': `--strategy '{"dp_degree": 2}'`), otherwise the
// contents of the file it names (errors name the file). Not parsed.
absl::StatusOr<std::string> ReadStrategyArgument(const std::string& argument);
// How errors name that argument: "strategy file 'dp2.json'" or "inline strategy JSON".
std::string StrategyArgumentName(const std::string& argument);

}  // namespace pdist::strategy
