// CompleteDistAttrs on hand-built programs: forward and reverse propagation, broadcasting,
// reshard insertion (shared, on an annotated intermediate, across meshes, for the optimizer),
// defaults, idempotence, explanations and errors.
#include "passes/completion.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ir/builder.h"
#include "ir/verifier.h"
#include "passes/autodiff.h"
#include "passes/optimizer.h"
#include "passes/spmd_call.h"
#include "tests/passes/dist_testing.h"

namespace pdist::passes {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ir::DataType;
using ir::Placement;
using ir::ProcessMesh;
using ir::Value;
using testing::Dist;
using testing::ReshardOps;
using testing::ReshardSummary;

const Placement R = Placement::Replicate();
Placement S(int64_t dim) { return Placement::Shard(dim); }

ir::TensorType F32(ir::Shape shape) { return {std::move(shape), DataType::kFloat32}; }

CompletionReport Complete(ir::Program& p, bool explain = false) {
  absl::StatusOr<CompletionReport> report = CompleteDistAttrs(p, {.explain = explain});
  EXPECT_TRUE(report.ok()) << report.status();
  absl::Status valid = ir::VerifyProgram(p);
  EXPECT_TRUE(valid.ok()) << valid;
  return report.ok() ? *report : CompletionReport{};
}

// Megatron's MLP on a 2-way mesh: x · w1 (column-parallel) · w2 (row-parallel), then relu.
struct Mlp {
  ir::Program p;
  Value *x, *w1, *w2, *h, *o, *r;
  explicit Mlp(const ProcessMesh& mesh) {
    ir::Builder b(&p);
    x = *b.ShardTensor(b.Data("x", F32({8, 16})), mesh, {R});
    w1 = *b.ShardTensor(b.Parameter("w1", F32({16, 32}), "normal(0.02)"), mesh, {S(1)});
    w2 = *b.ShardTensor(b.Parameter("w2", F32({32, 16}), "normal(0.02)"), mesh, {S(0)});
    h = *b.Op1("matmul", {x, w1});
    o = *b.Op1("matmul", {h, w2});
    r = *b.Op1("relu", {o});
  }
};

TEST(CompletionTest, MatmulChainIsColumnThenRowParallel) {
  Mlp m(ProcessMesh::Range({2}, {"mp"}));
  CompletionReport report = Complete(m.p);
  EXPECT_TRUE(report.changed);
  EXPECT_GE(report.rounds, 1);
  EXPECT_EQ(Dist(m.h), "[-1,0]");
  EXPECT_EQ(Dist(m.o), "[-1,-1] {0: sum}");  // the contracted dim is sharded: Partial
  EXPECT_EQ(Dist(m.r), "[-1,-1]");
  // relu is not linear: its operand is all-reduced first.
  ASSERT_EQ(ReshardOps(m.p).size(), 1u);
  const ir::Operation& reshard = *ReshardOps(m.p)[0];
  EXPECT_EQ(reshard.operand(0), m.o);
  EXPECT_EQ(ReshardSummary(reshard), "[-1,-1] {0: sum} -> [-1,-1]");
  EXPECT_EQ(m.r->producer()->operand(0), reshard.result(0));
  // Annotations are untouched.
  EXPECT_TRUE(m.w1->dist_annotated());
  EXPECT_EQ(Dist(m.w1), "[-1,0]");
}

TEST(CompletionTest, ReversePropagationReachesUnannotatedParameters) {
  const ProcessMesh mesh = ProcessMesh::Range({2}, {"dp"});
  ir::Program p;
  ir::Builder b(&p);
  Value* x = *b.ShardTensor(b.Data("x", F32({8, 16})), mesh, {S(0)});
  Value* bias = b.Parameter("bias", F32({16}), "zeros");
  Value* y = *b.Op1("add", {x, bias});
  CompletionReport report = Complete(p);
  EXPECT_EQ(Dist(y), "[0,-1]");
  EXPECT_EQ(Dist(bias), "[-1]");  // the batch dim it is broadcast over does not exist in it
  EXPECT_FALSE(bias->dist_annotated());
  EXPECT_EQ(report.reshards, 0);
}

TEST(CompletionTest, BroadcastOperandShardsTheOutputAndTheOtherOperandIsResharded) {
  const ProcessMesh mesh = ProcessMesh::Range({2}, {"mp"});
  ir::Program p;
  ir::Builder b(&p);
  Value* x = *b.ShardTensor(b.Data("x", F32({8, 16})), mesh, {R});
  Value* bias = *b.ShardTensor(b.Parameter("bias", F32({16}), "zeros"), mesh, {S(0)});
  Value* y = *b.Op1("add", {x, bias});
  Complete(p);
  // Paddle's merge: x's -1 yields to bias's 0 on the shared axis.
  EXPECT_EQ(Dist(y), "[-1,0]");
  ASSERT_EQ(ReshardOps(p).size(), 1u);
  EXPECT_EQ(ReshardOps(p)[0]->operand(0), x);
  EXPECT_EQ(ReshardSummary(*ReshardOps(p)[0]), "[-1,-1] -> [-1,0]");
}

TEST(CompletionTest, OneReshardServesEveryConsumerNeedingTheSameTarget) {
  Mlp m(ProcessMesh::Range({2}, {"mp"}));
  ir::Builder b(&m.p);
  Value* e = *b.Op1("exp", {m.o});
  Complete(m.p);
  ASSERT_EQ(ReshardOps(m.p).size(), 1u);
  EXPECT_EQ(m.r->producer()->operand(0), e->producer()->operand(0));
  EXPECT_EQ(Dist(e), "[-1,-1]");
}

TEST(CompletionTest, AnnotatedIntermediateBecomesAReshardOfWhatItsProducerGives) {
  const ProcessMesh mesh = ProcessMesh::Range({2}, {"dp"});
  ir::Program p;
  ir::Builder b(&p);
  Value* x = *b.ShardTensor(b.Data("x", F32({8, 16})), mesh, {S(0)});
  Value* y = *b.ShardTensor(*b.Op1("relu", {x}), mesh, {R});
  Value* z = *b.Op1("exp", {y});
  Complete(p);
  ASSERT_EQ(ReshardOps(p).size(), 1u);
  const ir::Operation& reshard = *ReshardOps(p)[0];
  EXPECT_EQ(reshard.result(0), y);  // y keeps its identity, annotation and uses
  EXPECT_TRUE(y->dist_annotated());
  EXPECT_EQ(ReshardSummary(reshard), "[0,-1] -> [-1,-1]");
  EXPECT_EQ(reshard.operand(0)->producer()->type(), "relu");
  EXPECT_EQ(Dist(z), "[-1,-1]");
}

TEST(CompletionTest, OperandOnAnotherMeshIsReshardedToTheOpsMesh) {
  const ProcessMesh stage0 = ProcessMesh::Range({2}, {"dp"});
  const ProcessMesh stage1 = *ProcessMesh::Create({2}, {2, 3}, {"dp"});
  ir::Program p;
  ir::Builder b(&p);
  Value* a = *b.ShardTensor(b.Data("a", F32({4, 4})), stage0, {S(0)});
  Value* c = *b.ShardTensor(b.Data("c", F32({4, 4})), stage1, {S(0)});
  Value* sum = *b.Op1("add", {a, c});
  Complete(p);
  // The op runs on its first operand's mesh; c moves there.
  EXPECT_EQ(sum->dist_attr()->mesh, stage0);
  ASSERT_EQ(ReshardOps(p).size(), 1u);
  const ir::Operation& reshard = *ReshardOps(p)[0];
  EXPECT_EQ(reshard.operand(0), c);
  EXPECT_EQ(reshard.result(0)->dist_attr()->mesh, stage0);
  EXPECT_EQ(ReshardSummary(reshard), "[0,-1] -> [0,-1]");
}

TEST(CompletionTest, ReshardWithoutTargetGoesWhereItsFirstUseNeeds) {
  const ProcessMesh mesh = ProcessMesh::Range({2}, {"mp"});
  ir::Program p;
  ir::Builder b(&p);
  Value* x = *b.ShardTensor(b.Data("x", F32({8, 16})), mesh, {S(1)});
  Value* y = *b.Op1("reshard", {x});  // no DistAttr on y: no target written
  std::vector<Value*> norm = *b.Create("layer_norm", {y, nullptr, nullptr}, {{"begin_norm_axis", int64_t{1}}});
  CompletionReport report = Complete(p, /*explain=*/true);
  // layer_norm needs the normalised axis whole: the written reshard goes there, no second one.
  EXPECT_EQ(report.reshards, 0);
  EXPECT_EQ(Dist(y), "[-1,-1]");
  EXPECT_EQ(norm[0]->producer()->operand(0), y);
  EXPECT_THAT(report.explanations, Contains(HasSubstr("%1 {mesh: [2] [mp], dims_mapping: [-1,-1]} ← its reshard has no "
                                                      "target written: what its first use needs, operand 0 of")));
}

TEST(CompletionTest, ValuesNoAnnotationReachesAreReplicatedOnTheMesh) {
  const ProcessMesh mesh = ProcessMesh::Range({2, 2}, {"dp", "mp"});
  ir::Program p;
  ir::Builder b(&p);
  *b.ShardTensor(b.Data("x", F32({8, 16})), mesh, {S(0), R});
  Value* lonely = b.Data("lonely", F32({4}));
  Value* y = *b.Op1("relu", {lonely});
  CompletionReport report = Complete(p, /*explain=*/true);
  EXPECT_EQ(Dist(lonely), "[-1]");
  EXPECT_EQ(lonely->dist_attr()->mesh, mesh);
  EXPECT_EQ(Dist(y), "[-1]");
  EXPECT_THAT(report.explanations, Contains(HasSubstr("%1 {mesh: [2,2] [dp,mp], dims_mapping: [-1]} ← reached from no annotation")));
}

TEST(CompletionTest, ProgramWithoutAnyDistAttrIsLeftAlone) {
  ir::Program p;
  ir::Builder b(&p);
  Value* y = *b.Op1("relu", {b.Data("x", F32({4}))});
  CompletionReport report = Complete(p);
  EXPECT_FALSE(report.changed);
  EXPECT_EQ(report.rounds, 0);
  EXPECT_FALSE(y->dist_attr());
}

TEST(CompletionTest, RunningTwiceChangesNothingTheSecondTime) {
  Mlp m(ProcessMesh::Range({2}, {"mp"}));
  Complete(m.p);
  const size_t ops = m.p.block().ops().size();
  CompletionReport again = Complete(m.p);
  EXPECT_FALSE(again.changed);
  EXPECT_EQ(again.reshards, 0);
  EXPECT_EQ(m.p.block().ops().size(), ops);
}

TEST(CompletionTest, DataParallelGradientIsAllReducedBeforeTheOptimizer) {
  const ProcessMesh mesh = ProcessMesh::Range({2}, {"dp"});
  ir::Program p;
  ir::Builder b(&p);
  Value* x = *b.ShardTensor(b.Data("x", F32({8, 16})), mesh, {S(0)});
  Value* w = b.Parameter("w", F32({16, 4}), "normal(0.02)");
  p.set_loss(*b.Op1("mean", {*b.Op1("matmul", {x, w})}));
  ASSERT_TRUE(AppendBackward(p, p.loss()).ok());
  ASSERT_TRUE(AppendOptimizer(p, {.type = OptimizerType::kSgd}).ok());
  Complete(p);
  EXPECT_EQ(Dist(w), "[-1,-1]");
  // w's gradient contracts the sharded batch: Partial; sgd needs it whole.
  EXPECT_EQ(Dist(p.GradientOf(w)), "[-1,-1] {0: sum}");
  const ir::Operation* sgd = p.updates()[0].new_value->producer();
  ASSERT_EQ(sgd->type(), "sgd");
  const ir::Operation* reshard = sgd->operand(2)->producer();
  ASSERT_EQ(reshard->type(), "reshard");
  EXPECT_EQ(reshard->operand(0), p.GradientOf(w));
  EXPECT_EQ(ReshardSummary(*reshard), "[-1,-1] {0: sum} -> [-1,-1]");
  EXPECT_EQ(Dist(p.updates()[0].new_value), "[-1,-1]");
}

TEST(CompletionTest, ExplanationsSayWhereEachDistAttrCameFrom) {
  Mlp m(ProcessMesh::Range({2}, {"mp"}));
  CompletionReport report = Complete(m.p, /*explain=*/true);
  EXPECT_THAT(report.explanations, Contains(HasSubstr("%0 {mesh: [2] [mp], dims_mapping: [-1,-1]} ← annotated")));
  EXPECT_THAT(report.explanations, Contains(HasSubstr("%3 {mesh: [2] [mp], dims_mapping: [-1,0]} ← forward: %3 = matmul(%0, %1)")));
  EXPECT_THAT(report.explanations, Contains(HasSubstr("← reshard inserted for operand 0 of %6 = relu(%5)")));
}

TEST(CompletionTest, ReverseOriginNamesTheConsumer) {
  const ProcessMesh mesh = ProcessMesh::Range({2}, {"dp"});
  ir::Program p;
  ir::Builder b(&p);
  *b.ShardTensor(b.Data("x", F32({8, 16})), mesh, {S(0)});
  b.Parameter("bias", F32({16}), "zeros");
  *b.Op1("add", {p.FindArgument("x"), p.FindArgument("bias")});
  CompletionReport report = Complete(p, /*explain=*/true);
  EXPECT_THAT(report.explanations, Contains(HasSubstr("%1 {mesh: [2] [dp], dims_mapping: [-1]} ← reverse: operand 1 of %2 = add(%0, %1)")));
}

TEST(SpmdCallTest, MissingRuleIsUnimplementedAndNamesTheOp) {
  ir::OpDef def;
  def.name = "mystery";
  SpmdCall call;
  call.def = &def;
  call.mesh_shape = {2};
  absl::StatusOr<ir::SpmdResult> r = RunSpmdRule(call);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(r.status().message(), HasSubstr("op 'mystery' has no forward SPMD rule"));
}

TEST(SpmdCallTest, RuleAnsweringWithTooFewSpecsIsAnInternalErrorNamingIt) {
  ir::OpDef def;
  def.name = "liar";
  def.infer_spmd = [](const std::vector<ir::TensorDistSpec>&, const ir::SpmdContext&) -> absl::StatusOr<ir::SpmdResult> {
    return ir::SpmdResult{};
  };
  SpmdCall call;
  call.def = &def;
  call.mesh_shape = {2};
  call.inputs = {{{4}, {0}, {}}};
  call.result_shapes = std::vector<ir::Shape>{{4}};
  absl::StatusOr<ir::SpmdResult> r = RunSpmdRule(call);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(r.status().message(), HasSubstr("the forward SPMD rule of 'liar' returned 0 input specs for 1 inputs"));
}

}  // namespace
}  // namespace pdist::passes
