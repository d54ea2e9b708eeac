// What full recompute replays as one piece (passes/recompute.h): one repeated layer, found from
// the graph — also when a pipeline stage boundary's reshard falls between two layers or inside
// one — with the embedding and the head a segment each; a whole stage when the planner's
// profiles ask; and the residual-stream cuts (two per layer) at the finest.
#include <string>

#include <gtest/gtest.h>

#include "ir/models/gpt.h"
#include "ir/parser.h"
#include "passes/pass_manager.h"
#include "passes/recompute.h"
#include "passes/repeated_pieces.h"
#include "strategy/strategy.h"

namespace pdist::passes {
namespace {

constexpr int64_t kLayers = 4;

// A 4-layer GPT through `pipeline` (autodiff last) under `strategy_json`.
ir::Program Prepared(const std::string& pipeline, const std::string& strategy_json) {
  ir::models::GptConfig cfg;
  cfg.layers = kLayers;
  cfg.batch = 4;
  ir::Program program = *ir::models::BuildGpt(cfg);
  PassManager pm;
  EXPECT_TRUE(pm.AddPipeline(pipeline).ok()) << pipeline;
  PassContext context;
  absl::StatusOr<strategy::Strategy> s = strategy::ParseStrategy(strategy_json);
  EXPECT_TRUE(s.ok()) << s.status();
  if (s.ok()) context.strategy = *s;
  absl::StatusOr<bool> ran = pm.Run(program, context);
  EXPECT_TRUE(ran.ok()) << ran.status();
  return program;
}

int64_t SegmentsReplayed(ir::Program program, RecomputeSegments by) {
  absl::StatusOr<RecomputeReport> report = ApplyRecompute(program, RecomputeGranularity::kFull, by);
  EXPECT_TRUE(report.ok()) << report.status();
  return report.ok() ? report->segments : -1;
}

TEST(RecomputeSegmentsTest, FullReplaysOneLayerAtATime) {
  const ir::Program program = Prepared("autodiff", "{}");
  // Each layer, the head; the embedding is a segment too, but its backward reads nothing it made
  // (the add of the positions reads only its operands' types, ir::OpDef::type_only_operands), so
  // nothing of it is replayed.
  EXPECT_EQ(SegmentsReplayed(program.Clone(), RecomputeSegments::kLayers), kLayers + 1);
  // Both residual streams of each layer cut it in two.
  EXPECT_EQ(SegmentsReplayed(program.Clone(), RecomputeSegments::kFinest), 2 * kLayers + 2);
  // One stage, one segment.
  EXPECT_EQ(SegmentsReplayed(program.Clone(), RecomputeSegments::kStages), 1);
}

// A stage boundary's reshard is a segment of its own (before completion it is the only sign of
// the boundary), so no replay sends again.
TEST(RecomputeSegmentsTest, AStageBoundaryBetweenLayersKeepsTheLayers) {
  const ir::Program program = Prepared("micro-batch{n=2},annotate-strategy,autodiff",
                                       R"({"pp_degree": 2, "pipeline": {"accumulate_steps": 2, "split_before": ["gpt.h.2.*"]}})");
  EXPECT_EQ(SegmentsReplayed(program.Clone(), RecomputeSegments::kLayers), kLayers + 1);
  EXPECT_EQ(SegmentsReplayed(program.Clone(), RecomputeSegments::kStages), 2);
}

// A boundary inside layer 2 (before its MLP) sends two values, the normed input of the MLP and
// the residual, read at different places: the ops between the two reshards are a segment too.
// The other layers are still found (the reshards are transparent when layers are compared).
TEST(RecomputeSegmentsTest, AStageBoundaryInsideALayerCutsThatLayerOnly) {
  const ir::Program program = Prepared("micro-batch{n=2},annotate-strategy,autodiff",
                                       R"({"pp_degree": 2, "pipeline": {"accumulate_steps": 2, "split_before": ["gpt.h.2.mlp*"]}})");
  const int64_t layers = SegmentsReplayed(program.Clone(), RecomputeSegments::kLayers);
  EXPECT_GE(layers, kLayers + 1);
  EXPECT_LE(layers, kLayers + 2);
  EXPECT_EQ(SegmentsReplayed(program.Clone(), RecomputeSegments::kStages), 3);
  EXPECT_GT(SegmentsReplayed(program.Clone(), RecomputeSegments::kFinest), layers);
}

// A reshard moves a value and computes nothing: two blocks that compute the same, one with a
// reshard between its ops, compare equal, and the results after the reshard keep their numbers.
TEST(RepeatedPiecesTest, ReshardsAreTransparent) {
  absl::StatusOr<ir::Program> program = ir::ParseProgram(R"pdir(
program {
  %x = data "x" : f32[4,8]
  %w = param "w" : f32[8,8] {init = "normal(0.02)"}
  %p = tanh(%x) : f32[4,8]
  %a = tanh(%p) : f32[4,8]
  %b = matmul(%a, %w) : f32[4,8]
  %c = add(%p, %b) : f32[4,8]
  %d = tanh(%c) : f32[4,8]
  %e = reshard(%d) : f32[4,8] dist! {mesh: [2] [dp], dims_mapping: [-1,-1]}
  %f = matmul(%e, %w) : f32[4,8]
  %g = add(%c, %f) : f32[4,8]
  %l = mean(%g) : f32[]
  loss %l
}
)pdir");
  ASSERT_TRUE(program.ok()) << program.status();
  std::vector<const ir::Operation*> ops;
  for (const auto& op : program->block().ops()) ops.push_back(op.get());
  ASSERT_EQ(ops[5]->type(), "reshard");
  EXPECT_EQ(PieceSignature(ops, 1, 4), PieceSignature(ops, 4, 8));
  const Pieces pieces = CutIntoPieces(ops, {1, 4, 8});
  EXPECT_EQ(pieces.id, (std::vector<int64_t>{0, 1, 1, 2}));
  const Repetition r = LongestRepetition(pieces);
  EXPECT_EQ(r.start, 1u);
  EXPECT_EQ(r.period, 1u);
  EXPECT_EQ(r.copies, 2u);
  EXPECT_EQ(r.ops_covered, 7);
}

}  // namespace
}  // namespace pdist::passes
