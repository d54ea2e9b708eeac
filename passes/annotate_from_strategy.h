// AnnotateFromStrategy: a Strategy's degrees (dp, mp, sp) turned into annotations of a forward
// program, found by the shape of its ops — never by names — so that a model.pb built elsewhere
// with the same structure is annotated the same way (docs/strategy.md, "Annotating from degrees").
//
//   strategy::Strategy s{.dp_degree = 2, .mp_degree = 2};
//   PDIST_RETURN_IF_ERROR(passes::AnnotateFromStrategy(s, forward));   // then autodiff, completion
//   // on mesh [2,2] [dp,mp]:
//   //   %0 = data "tokens" : i64[8,32] dist! {..., dims_mapping: [0,-1]}          batch over dp
//   //   param (qkv weight, read by a matmul of a layer_norm's output)  [-1,1]   column-parallel
//   //   param (the matmul weight those columns flow into)              [1,-1]   row-parallel
//   //   param (an embedding table) [1,-1]     param (the head before the loss) [-1,1]
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ir/dist/placement.h"
#include "ir/dist/process_mesh.h"
#include "ir/program.h"
#include "strategy/strategy.h"

namespace pdist::passes {

// One value the pass annotates, and why:
//   {value: qkv weight, placements: [Replicate(), Shard(1)],
//    reason: "column-parallel: %14 = matmul(%12, %5) reads %12 = layer_norm(...)"}
struct StrategyAnnotation {
  ir::Value* value = nullptr;
  std::vector<ir::Placement> placements;  // one per mesh dim: [dp, mp]
  std::string reason;
};

struct StrategyAnnotationPlan {
  // Always the 2-D mesh [dp_degree, mp_degree] with dim names "dp" and "mp", ids 0..n-1, even
  // when a degree is 1; along an axis of degree 1 every planned placement is Replicate().
  ir::ProcessMesh mesh;
  std::vector<StrategyAnnotation> annotations;  // in program order: arguments, then op results
  // Patterns seen but left to completion ("%40 = matmul(...): ... reaches %41 = layer_norm(...)"),
  // and values kept because the program already annotated them.
  std::vector<std::string> notes;
};

// Finds what to annotate, changing nothing:
//  - data parallel: every data input of rank ≥ 1 except "learning_rate": Shard(0) along dp;
//  - tensor parallel along mp (Megatron-LM), when mp_degree > 1:
//      column-parallel: a matmul (no trans_x) of a 2-D parameter whose x is the output of a
//        layer_norm / rms_norm (through reshape, squeeze, unsqueeze, cast): the weight is
//        sharded on its output columns (Shard(1); Shard(0) with trans_y), a 1-D parameter added
//        right after (its bias) Shard(0);
//      row-parallel: a matmul of a 2-D parameter reached from column-parallel outputs through
//        elementwise, activation, attention and view ops: the weight on its input rows
//        (Shard(0); Shard(1) with trans_y). A column-parallel matmul whose outputs also reach
//        another op (a norm, the loss) is left to completion, with a note;
//      vocab-parallel: the 2-D parameter table of an `embedding`: Shard(0);
//      LM head: a matmul of a 2-D parameter whose result is the logits of
//        cross_entropy_with_softmax: sharded on the vocabulary (Shard(1); Shard(0) with
//        trans_y). A head tied to the embedding table is that table, already Shard(0);
//  - sequence parallel (sp, needs mp_degree > 1), on [batch, seq, hidden] activations: the
//    input of every norm that feeds a column-parallel matmul or the head Shard(1) (the sequence)
//    along mp, its output Replicate along mp (completion's all_gather before those matmuls), and
//    the outputs of the row-parallel matmuls and of the vocab-parallel embedding Shard(1) along
//    mp (a reduce_scatter of their Partial sums).
// Values the program already annotates are kept (a note says so). Errors:
//  - InvalidArgument for pp_degree > 1: stages are cut and planned by passes/pipeline_stages.h;
//  - InvalidArgument when sp is set with mp_degree 1, when a sharded dim is not divisible by
//    its degree (naming the tensor, the dim and both sizes: the batch by dp, the columns, rows,
//    vocabulary, heads and the sequence by mp), when mp_degree > 1 finds no tensor-parallel
//    pattern and the strategy has no annotations;
//  - FailedPrecondition for a program that already has gradients (autodiff has run).
absl::StatusOr<StrategyAnnotationPlan> PlanStrategyAnnotations(const strategy::Strategy& strategy,
                                                               const ir::Program& forward);

// Plans, annotates (ir::ShardTensor: marked annotated, so completion keeps them), then applies
// the strategy's own `annotations` on top (ApplyAnnotations: an explicit annotation wins). All
// or nothing: on error the program's DistAttrs are unchanged. Returns the plan.
absl::StatusOr<StrategyAnnotationPlan> AnnotateFromStrategyExplained(const strategy::Strategy& strategy,
                                                                     ir::Program& forward);
absl::Status AnnotateFromStrategy(const strategy::Strategy& strategy, ir::Program& forward);

}  // namespace pdist::passes
