// Micro-batch programs and pipeline stages: shapes of one micro-batch, the loss scale, balanced
// cuts, stage meshes and boundary reshards, and the errors a program or strategy can raise.
#include <gtest/gtest.h>

#include <unordered_map>

#include "absl/strings/str_cat.h"

#include "ir/builder.h"
#include "ir/dist/shard_tensor.h"
#include "ir/models/gpt.h"
#include "ir/verifier.h"
#include "passes/amp.h"
#include "passes/micro_batch.h"
#include "passes/pipeline_stages.h"

namespace pdist::passes {
namespace {

ir::Program Gpt(int64_t layers = 4, int64_t batch = 8) {
  ir::models::GptConfig c;
  c.vocab = 64;
  c.hidden = 32;
  c.layers = layers;
  c.heads = 4;
  c.seq_len = 8;
  c.batch = batch;
  return *ir::models::BuildGpt(c);
}

// x: f32[8,4] → loss = reduce(x · w) over everything.
ir::Program Tiny(const std::string& reduce, bool mix_samples = false) {
  ir::Program p;
  ir::Builder b(&p);
  ir::Value* x = b.Data("x", {{8, 4}, ir::DataType::kFloat64});
  ir::Value* w = b.Parameter("w", {{4, 4}, ir::DataType::kFloat64}, "normal(0.1)");
  ir::Value* y = *b.Op1("matmul", {x, w});
  if (mix_samples) {  // y - mean over the batch: every sample needs every other
    ir::Value* centre = *b.Op1("mean", {y}, {{"axis", std::vector<int64_t>{0}}, {"keep_dim", true}});
    y = *b.Op1("subtract", {y, centre});
  }
  p.set_loss(*b.Op1(reduce, {y}));
  return p;
}

TEST(SplitMicroBatchesTest, OneMicroBatchOfAGptVerifiesAndScalesTheMeanLoss) {
  const ir::Program gpt = Gpt();
  auto micro = SplitMicroBatches(gpt, 4);
  ASSERT_TRUE(micro.ok()) << micro.status();
  EXPECT_EQ(micro->program.FindArgument("tokens")->type().shape, (ir::Shape{2, 8}));
  EXPECT_EQ(micro->program.FindArgument("labels")->type().shape, (ir::Shape{2, 8}));
  EXPECT_EQ(micro->split_inputs, (std::vector<std::string>{"tokens", "labels"}));
  EXPECT_TRUE(ir::VerifyProgram(micro->program).ok());
  const ir::Operation* scale = micro->program.loss()->producer();
  EXPECT_EQ(scale->type(), "scale");
  EXPECT_DOUBLE_EQ(std::get<double>(scale->attrs().at("scale")), 0.25);
  // Parameters keep their shapes: only what comes from the batch is cut.
  for (const ir::Value* p : micro->program.Parameters()) {
    EXPECT_EQ(p->type(), gpt.FindArgument(p->name())->type()) << p->name();
  }
}

TEST(SplitMicroBatchesTest, ASumLossIsNotScaled) {
  auto micro = SplitMicroBatches(Tiny("sum"), 2);
  ASSERT_TRUE(micro.ok()) << micro.status();
  EXPECT_EQ(micro->program.loss()->producer()->type(), "sum");
  EXPECT_EQ(micro->program.FindArgument("x")->type().shape, (ir::Shape{4, 4}));
}

TEST(SplitMicroBatchesTest, ErrorsNameTheCulprit) {
  auto uneven = SplitMicroBatches(Tiny("mean"), 3);
  ASSERT_FALSE(uneven.ok());
  EXPECT_NE(uneven.status().message().find("(8, dim 0 of 'x') is not divisible by 3 micro-batches"), std::string::npos)
      << uneven.status();

  auto mixed = SplitMicroBatches(Tiny("mean", /*mix_samples=*/true), 2);
  ASSERT_FALSE(mixed.ok());
  EXPECT_NE(mixed.status().message().find("reads samples of the whole batch"), std::string::npos) << mixed.status();
  EXPECT_NE(mixed.status().message().find("subtract"), std::string::npos) << mixed.status();

  auto max_loss = SplitMicroBatches(Tiny("max"), 2);
  ASSERT_FALSE(max_loss.ok());
  EXPECT_NE(max_loss.status().message().find("only a sum or a mean"), std::string::npos) << max_loss.status();

  ir::Program annotated = Tiny("mean");
  ASSERT_TRUE(ir::ShardTensor(annotated.FindArgument("w"), ir::ProcessMesh::Range({2}), {ir::Placement::Replicate()}).ok());
  auto early = SplitMicroBatches(annotated, 2);
  ASSERT_FALSE(early.ok());
  EXPECT_NE(early.status().message().find("before it is annotated"), std::string::npos) << early.status();
}

TEST(BalanceStagesTest, CutsAGptIntoBalancedStagesInProgramOrder) {
  const ir::Program gpt = Gpt(/*layers=*/8);
  for (int64_t k : {2, 4}) {
    auto stages = BalanceStages(gpt, k);
    ASSERT_TRUE(stages.ok()) << stages.status();
    EXPECT_TRUE(std::is_sorted(stages->begin(), stages->end()));
    EXPECT_EQ(stages->front(), 0);
    EXPECT_EQ(stages->back(), k - 1);
  }
  auto too_many = BalanceStages(gpt, 100000);
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.status().message().find("can be cut in only"), std::string::npos) << too_many.status();
}

// The last op that reads a value made on stage k, for every value: it is on stage k or k + 1.
void ExpectNoValueSkipsAStage(const ir::Program& program, const std::vector<int64_t>& stage_of, int64_t k) {
  std::unordered_map<const ir::Value*, int64_t> home;
  const auto& ops = program.block().ops();
  for (size_t i = 0; i < ops.size(); ++i) {
    for (const ir::Value* v : ops[i]->operands()) {
      if (v == nullptr || v->is_argument()) continue;
      EXPECT_LE(stage_of[i] - home.at(v), 1) << k << " stages: " << ops[i]->Describe() << " reads %" << v->id();
    }
    for (const ir::Value* r : ops[i]->results()) home[r] = stage_of[i];
  }
}

// Past the cuts between layers (one value crosses: the residual stream) the cuts go inside
// them, where a value may cross two cuts (the residual, around an attention block cut in two):
// a message between stages that are not neighbours, which no schedule orders. None is chosen;
// a count that needs one is refused with the most there can be.
TEST(BalanceStagesTest, NoValueIsReadTwoStagesOn) {
  const ir::Program gpt = Gpt(/*layers=*/4);
  for (int64_t k : {2, 4, 5, 8, 12}) {
    auto stages = BalanceStages(gpt, k);
    ASSERT_TRUE(stages.ok()) << k << ": " << stages.status();
    EXPECT_EQ(stages->back(), k - 1);
    ExpectNoValueSkipsAStage(gpt, *stages, k);
  }
  int64_t most = 2;
  while (BalanceStages(gpt, most + 1).ok()) ++most;
  auto too_many = BalanceStages(gpt, most + 1);
  EXPECT_NE(too_many.status().message().find(absl::StrCat("so that every value is read on its own stage or the next; "
                                                           "it can be cut into at most ", most, ":")),
            std::string::npos) << too_many.status();
  auto cut = BalanceStages(gpt, most);
  ASSERT_TRUE(cut.ok()) << cut.status();
  ExpectNoValueSkipsAStage(gpt, *cut, most);
}

TEST(StagesFromMarksTest, AMarkThatMakesAValueSkipAStageIsRefused) {
  ir::Program gpt = Gpt();
  strategy::Strategy s;
  s.pp_degree = 3;
  // Cut before layer 1's attention and again before its output projection: the residual stream
  // from before the first cut is added after the second.
  s.pipeline.split_before = {"gpt.h.1.attn.qkv*", "gpt.h.1.attn.proj*"};
  auto stages = AnnotatePipelineStages(s, gpt);
  ASSERT_FALSE(stages.ok());
  EXPECT_NE(stages.status().message().find("from virtual stage 0 on another rank: a value may cross one cut only"), std::string::npos)
      << stages.status();
  EXPECT_NE(stages.status().message().find("move the pipeline.split_before marks"), std::string::npos);
}

TEST(StagesFromMarksTest, AStageStartsAtTheFirstReaderOfItsMarkedParameters) {
  const ir::Program gpt = Gpt(/*layers=*/4);
  auto stages = StagesFromMarks(gpt, {"gpt.h.1.*", "gpt.h.3.*"});
  ASSERT_TRUE(stages.ok()) << stages.status();
  const auto& ops = gpt.block().ops();
  for (size_t i = 0; i < ops.size(); ++i) {
    for (const ir::Value* v : ops[i]->operands()) {
      if (v == nullptr || !v->is_argument()) continue;
      const std::string& name = v->name();
      const bool first = name.rfind("gpt.h.0.", 0) == 0;
      const bool middle = name.rfind("gpt.h.1.", 0) == 0 || name.rfind("gpt.h.2.", 0) == 0;
      const bool last = name.rfind("gpt.h.3.", 0) == 0 || name == "labels";
      if (first || middle || last) {
        EXPECT_EQ((*stages)[i], first ? 0 : middle ? 1 : 2) << name;
      }
    }
  }
  auto unmatched = StagesFromMarks(gpt, {"gpt.h.9.*"});
  ASSERT_FALSE(unmatched.ok());
  EXPECT_NE(unmatched.status().message().find("pipeline.split_before[0] 'gpt.h.9.*' matches no argument"),
            std::string::npos) << unmatched.status();
  auto backwards = StagesFromMarks(gpt, {"gpt.h.3.*", "gpt.h.1.*"});
  ASSERT_FALSE(backwards.ok());
  EXPECT_NE(backwards.status().message().find("list the stages in program order"), std::string::npos)
      << backwards.status();
  // The first stage's own parameters (the embedding): it needs no mark (was "not after the
  // previous stage's start (op #0)").
  auto first = StagesFromMarks(gpt, {"gpt.wte*"});
  ASSERT_FALSE(first.ok());
  EXPECT_NE(first.status().message().find("starts at op #0, where the first stage starts unmarked"), std::string::npos)
      << first.status();
}

// The index of the first op of the stage that starts at `mark` (the op count when none does).
size_t SecondStageStart(const ir::Program& program, const std::string& mark) {
  auto stages = StagesFromMarks(program, {mark});
  EXPECT_TRUE(stages.ok()) << stages.status();
  size_t start = 0;
  while (stages.ok() && start < stages->size() && (*stages)[start] == 0) ++start;
  return stages.ok() ? start : program.block().ops().size();
}

// With its norms in f32 (o2 with layer_norm on the custom f32 list, or o1 on a bf16 residual) a
// layer norm reads an f32 cast of the bf16 residual. A stage marked at the norm's parameters
// starts at the cast instead: only the bf16 residual crosses there, where at the norm the cast
// and the residual both would (three times the bytes). The cast reads no parameter, so every
// parameter stays where the mark puts it.
TEST(StagesFromMarksTest, UnderMixedPrecisionAStageStartsBeforeTheNormsCast) {
  ir::Program gpt = Gpt(/*layers=*/4);
  ASSERT_TRUE(ApplyAmp(gpt, ir::DataType::kBFloat16, AmpLevel::kO2, {.float32 = {"layer_norm"}}).ok());
  const size_t start = SecondStageStart(gpt, "gpt.h.2.*");
  const auto& ops = gpt.block().ops();
  ASSERT_LT(start + 1, ops.size());
  EXPECT_EQ(ops[start]->type(), "cast");
  EXPECT_EQ(ops[start + 1]->type(), "layer_norm");
  EXPECT_EQ(ops[start + 1]->operand(1)->name(), "gpt.h.2.ln_1.weight");
  const std::vector<int64_t> crossing = CrossingValues(gpt);
  EXPECT_EQ(crossing[start], 1);
  EXPECT_EQ(crossing[start + 1], 2);

  strategy::Strategy s;
  s.pp_degree = 2;
  s.pipeline.split_before = {"gpt.h.2.*"};
  auto annotated = AnnotatePipelineStages(s, gpt);
  ASSERT_TRUE(annotated.ok()) << annotated.status();
  EXPECT_EQ(annotated->boundary_reshards, 1);  // the bf16 residual alone
  for (const auto& op : gpt.block().ops()) {
    if (op->type() == "reshard") {
      EXPECT_EQ(op->result(0)->type().dtype, ir::DataType::kBFloat16);
    }
  }
}

// o2's own norms read the bf16 residual itself: the stage starts at the norm, and the residual
// alone crosses.
TEST(StagesFromMarksTest, UnderOTwoAStageStartsAtTheNormOnTheBf16Residual) {
  ir::Program gpt = Gpt(/*layers=*/4);
  ASSERT_TRUE(ApplyAmp(gpt, ir::DataType::kBFloat16, AmpLevel::kO2).ok());
  const size_t start = SecondStageStart(gpt, "gpt.h.2.*");
  const auto& ops = gpt.block().ops();
  ASSERT_LT(start, ops.size());
  ASSERT_EQ(ops[start]->type(), "layer_norm");
  EXPECT_EQ(ops[start]->operand(0)->type().dtype, ir::DataType::kBFloat16);
  EXPECT_EQ(ops[start]->operand(1)->name(), "gpt.h.2.ln_1.weight");
  EXPECT_EQ(CrossingValues(gpt)[start], 1);
}

TEST(AnnotatePipelineStagesTest, StageMeshesBalancedFlopsAndOneBoundaryPerCut) {
  ir::Program gpt = Gpt(/*layers=*/8);
  strategy::Strategy s;
  s.pp_degree = 2;
  s.dp_degree = 2;
  auto stages = AnnotatePipelineStages(s, gpt);
  ASSERT_TRUE(stages.ok()) << stages.status();
  ASSERT_EQ(stages->meshes.size(), 2u);
  EXPECT_EQ(stages->meshes[1].process_ids(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(stages->boundary_reshards, 1);  // the residual stream, once
  const double heavier = std::max(stages->flops[0], stages->flops[1]);
  const double lighter = std::min(stages->flops[0], stages->flops[1]);
  EXPECT_LT(heavier / lighter, 1.5) << stages->flops[0] << " vs " << stages->flops[1];
  for (const ir::Value* arg : gpt.block().arguments()) {
    ASSERT_TRUE(arg->dist_attr().has_value()) << arg->name();
    EXPECT_TRUE(arg->dist_annotated()) << arg->name();
  }
  EXPECT_EQ(gpt.FindArgument("tokens")->dist_attr()->mesh, stages->meshes[0]);
  EXPECT_EQ(gpt.FindArgument("labels")->dist_attr()->mesh, stages->meshes[1]);
}

TEST(AnnotatePipelineStagesTest, InterleavedChunksAlternateBetweenStages) {
  ir::Program gpt = Gpt(/*layers=*/8);
  strategy::Strategy s;
  s.pp_degree = 2;
  s.pipeline.vpp_degree = 2;
  auto stages = AnnotatePipelineStages(s, gpt);
  ASSERT_TRUE(stages.ok()) << stages.status();
  EXPECT_EQ(stages->flops.size(), 4u);
  EXPECT_EQ(stages->boundary_reshards, 3);
  int64_t max_chunk = 0;
  for (const auto& op : gpt.block().ops()) max_chunk = std::max(max_chunk, op->chunk());
  EXPECT_EQ(max_chunk, 1);
  EXPECT_EQ(gpt.FindArgument("labels")->dist_attr()->mesh, stages->meshes[1]);  // virtual stage 3 → stage 1
}

TEST(AnnotatePipelineStagesTest, PerTensorAnnotationsWithStagesAreRefused) {
  ir::Program gpt = Gpt();
  strategy::Strategy s;
  s.pp_degree = 2;
  s.annotations.push_back({"gpt.wte", ir::ProcessMesh::Range({2}), {ir::Placement::Replicate()}});
  auto stages = AnnotatePipelineStages(s, gpt);
  ASSERT_FALSE(stages.ok());
  EXPECT_NE(stages.status().message().find("per-tensor annotations"), std::string::npos) << stages.status();
}

}  // namespace
}  // namespace pdist::passes
