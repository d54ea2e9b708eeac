// Completion of a 2-layer GPT with Megatron-style annotations on a [dp=2, mp=2] mesh, after
// autodiff and adamw: the placement of every weight, activation and gradient, the exact list of
// reshard ops, and that the completed program still computes the same step on one rank.
// The expectations follow the SPMD rules of ir/spmd (Paddle's semantics); a change of a rule
// that moves a reshard shows up here by name.
#include <algorithm>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "executor/executor.h"
#include "ir/models/gpt.h"
#include "ir/printer.h"
#include "ir/status.h"
#include "ir/verifier.h"
#include "passes/annotate.h"
#include "passes/autodiff.h"
#include "passes/completion.h"
#include "passes/optimizer.h"
#include "strategy/presets.h"
#include "tests/passes/dist_testing.h"
#include "tests/testing/op_testing.h"

namespace pdist::passes {
namespace {

using ir::Operation;
using ir::Value;
using testing::Dist;

constexpr int kLayers = 2;
const ir::models::GptConfig kConfig{.vocab = 64, .hidden = 32, .layers = kLayers, .heads = 4, .seq_len = 8, .batch = 4};

// Mapping strings on the [dp, mp] mesh: mesh dim 0 is dp, 1 is mp.
constexpr char kBatch[] = "[0,-1,-1]";          // [b, s, h] split over dp
constexpr char kBatchHidden[] = "[0,-1,1]";     // ... and the hidden axis over mp (column-parallel)
constexpr char kRowParallel[] = "[0,-1,-1] {1: sum}";  // a partial sum over mp

absl::StatusOr<ir::Program> BuildAnnotatedGpt() {
  PDIST_ASSIGN_OR_RETURN(ir::Program p, ir::models::BuildGpt(kConfig));
  strategy::Strategy s;
  s.dp_degree = 2;
  s.mp_degree = 2;
  s.annotations = strategy::MegatronGptAnnotations(ir::ProcessMesh::Range({2, 2}, {"dp", "mp"}));
  PDIST_RETURN_IF_ERROR(ApplyAnnotations(s, p));
  PDIST_RETURN_IF_ERROR(AppendBackward(p, p.loss()));
  PDIST_RETURN_IF_ERROR(AppendOptimizer(p, {}));
  return p;
}

class GptCompletionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<ir::Program> p = BuildAnnotatedGpt();
    ASSERT_TRUE(p.ok()) << p.status();
    program_ = *std::move(p);
    absl::StatusOr<CompletionReport> report = CompleteDistAttrs(program_, {.explain = true});
    ASSERT_TRUE(report.ok()) << report.status();
    report_ = *std::move(report);
    ASSERT_TRUE(ir::VerifyProgram(program_).ok());
  }

  const Value* Arg(const std::string& name) const {
    const Value* v = program_.FindArgument(name);
    EXPECT_NE(v, nullptr) << name;
    return v;
  }
  // The first op of `type` that reads `v`.
  const Operation* Consumer(const Value* v, const std::string& type) const {
    for (const auto& op : program_.block().ops()) {
      if (op->type() != type) continue;
      for (const Value* operand : op->operands()) {
        if (operand == v) return op.get();
      }
    }
    ADD_FAILURE() << "no " << type << " reads " << (v ? v->name() : "null");
    static const Operation kNone("none", {}, {});
    return &kNone;
  }
  const Value* Out(const Value* v, const std::string& type, size_t result = 0) const {
    const Operation* op = Consumer(v, type);
    return op->num_results() > result ? op->result(result) : nullptr;
  }
  std::string Layer(int i, const std::string& rest) const { return absl::StrCat("gpt.h.", i, ".", rest); }

  ir::Program program_;
  CompletionReport report_;
};

TEST_F(GptCompletionTest, ColumnParallelOutputsAreShardedOnTheHiddenAxis) {
  for (int i = 0; i < kLayers; ++i) {
    SCOPED_TRACE(i);
    const Value* qkv = Out(Arg(Layer(i, "attn.qkv.weight")), "matmul");
    EXPECT_EQ(Dist(qkv), kBatchHidden);
    const Value* qkv_biased = Out(qkv, "add");
    EXPECT_EQ(Dist(qkv_biased), kBatchHidden);
    // [b, s, heads, 3·head_dim]: the heads carry the mp split into attention.
    const Value* heads = Out(qkv_biased, "reshape");
    EXPECT_EQ(Dist(heads), "[0,-1,1,-1]");
    const Operation* split = Consumer(heads, "split_with_num");
    for (const Value* part : split->results()) EXPECT_EQ(Dist(part), "[0,-1,1,-1]");
    EXPECT_EQ(Dist(Out(split->result(0), "flash_attn")), "[0,-1,1,-1]");

    const Value* up = Out(Arg(Layer(i, "mlp.up.weight")), "matmul");
    EXPECT_EQ(Dist(up), kBatchHidden);
    EXPECT_EQ(Dist(Out(Out(up, "add"), "gelu")), kBatchHidden);
  }
}

TEST_F(GptCompletionTest, RowParallelOutputsArePartialUntilTheirReshard) {
  for (int i = 0; i < kLayers; ++i) {
    SCOPED_TRACE(i);
    for (const char* weight : {"attn.proj.weight", "mlp.down.weight"}) {
      const Value* out = Out(Arg(Layer(i, weight)), "matmul");
      EXPECT_EQ(Dist(out), kRowParallel) << weight;
      // The all-reduce (Megatron's g) before the bias add; the residual stream stays whole on mp.
      const Value* reduced = Out(out, "reshard");
      EXPECT_EQ(Dist(reduced), kBatch) << weight;
      EXPECT_EQ(Dist(Out(reduced, "add")), kBatch) << weight;
    }
    EXPECT_EQ(Dist(Out(Arg(Layer(i, "ln_1.weight")), "layer_norm")), kBatch);
    EXPECT_EQ(Dist(Out(Arg(Layer(i, "ln_2.weight")), "layer_norm")), kBatch);
  }
}

TEST_F(GptCompletionTest, VocabParallelEmbeddingHeadAndLoss) {
  const Value* embedded = Out(Arg("gpt.wte"), "embedding");
  EXPECT_EQ(Dist(embedded), kRowParallel);  // each mp rank looks up its half of the vocabulary
  EXPECT_EQ(Dist(Out(embedded, "reshard")), kBatch);
  const Value* logits = Out(Arg("gpt.lm_head.weight"), "matmul");
  EXPECT_EQ(Dist(logits), "[0,-1,1]");
  const Operation* ce = Consumer(logits, "cross_entropy_with_softmax");
  EXPECT_EQ(Dist(ce->result(0)), "[0,-1,1]");   // softmax, vocab-sharded
  EXPECT_EQ(Dist(ce->result(1)), "[0,-1,-1]");  // per-token loss: the kernel reduces over the vocabulary
  EXPECT_EQ(Dist(program_.loss()), "[] {0: avg}");  // the mean over the dp-sharded batch
}

// Whether `p` is split over mp (mesh dim 1).
bool ShardedOnMp(const Value* p) {
  const ir::DimsMapping& m = p->dist_attr()->dims_mapping;
  return std::find(m.begin(), m.end(), 1) != m.end();
}

TEST_F(GptCompletionTest, WeightsKeepTheirPlacementAndGradientsArePartial) {
  for (const Value* p : program_.Parameters()) {
    SCOPED_TRACE(p->name());
    ASSERT_TRUE(p->dist_attr());
    const Value* grad = program_.GradientOf(p);
    // Every weight gradient sums over the dp-sharded batch. A weight replicated over mp is also
    // Partial over mp: the backward all-reduce over mp is deferred past the norms and residual
    // adds (linear in the gradient) to the next row-parallel matmul_grad, so their weight
    // gradients are made of per-mp-rank pieces.
    EXPECT_EQ(Dist(grad), absl::StrCat(Dist(p), ShardedOnMp(p) ? " {0: sum}" : " {0: sum, 1: sum}"));
    // The optimizer reads it all-reduced (the data-parallel all-reduce), in the weight's layout.
    const Operation* adamw = Consumer(p, "adamw");
    const Operation* reshard = adamw->operand(1)->producer();
    ASSERT_NE(reshard, nullptr);
    EXPECT_EQ(reshard->type(), "reshard");
    EXPECT_EQ(reshard->operand(0), grad);
    EXPECT_EQ(Dist(adamw->operand(1)), Dist(p));
    for (size_t r = 0; r < 3; ++r) EXPECT_EQ(Dist(adamw->result(r)), Dist(p));  // param, moments
    EXPECT_EQ(Dist(Arg(p->name() + ".moment1")), Dist(p));
    EXPECT_EQ(Dist(Arg(p->name() + ".beta1_pow")), "[-1]");
  }
  // Unannotated weights are replicated.
  EXPECT_EQ(Dist(Arg("gpt.wpe")), "[-1,-1]");
  EXPECT_EQ(Dist(Arg("gpt.h.0.attn.proj.bias")), "[-1]");
  EXPECT_EQ(Dist(Arg("gpt.ln_f.weight")), "[-1]");
}

TEST_F(GptCompletionTest, BackwardStaysPartialOverMpUntilARowParallelGradient) {
  for (int i = 0; i < kLayers; ++i) {
    SCOPED_TRACE(i);
    // Column-parallel backward: the input gradient sums over the mp-split columns (Megatron's f).
    const Operation* qkv_grad = Consumer(Arg(Layer(i, "attn.qkv.weight")), "matmul_grad");
    EXPECT_EQ(Dist(qkv_grad->result(0)), kRowParallel);
    EXPECT_EQ(Dist(qkv_grad->result(1)), "[-1,1] {0: sum}");
    // layer_norm_grad is linear in its out_grad: the Partial passes through.
    const Operation* ln_grad = Consumer(Arg(Layer(i, "ln_1.weight")), "layer_norm_grad");
    EXPECT_EQ(ln_grad->operand(5), qkv_grad->result(0));
    EXPECT_EQ(Dist(ln_grad->result(0)), kRowParallel);
    // A row-parallel matmul_grad needs its out_grad whole over mp: the all-reduce goes there.
    for (const char* weight : {"attn.proj.weight", "mlp.down.weight"}) {
      const Operation* grad = Consumer(Arg(Layer(i, weight)), "matmul_grad");
      EXPECT_EQ(grad->operand(2)->producer()->type(), "reshard") << weight;
      EXPECT_EQ(Dist(grad->operand(2)->producer()->operand(0)), kRowParallel) << weight;
      EXPECT_EQ(Dist(grad->operand(2)), kBatch) << weight;
      EXPECT_EQ(Dist(grad->result(0)), kBatchHidden) << weight;
      EXPECT_EQ(Dist(grad->result(1)), "[1,-1] {0: sum}") << weight;
    }
  }
}

TEST_F(GptCompletionTest, ExactlyTheExpectedReshardsAreInserted) {
  const std::string all_reduce_mp = absl::StrCat(kRowParallel, " -> ", kBatch);
  std::vector<std::string> expected = {"add#0: " + all_reduce_mp};  // vocab-parallel embedding
  for (int i = 0; i < kLayers; ++i) {
    expected.push_back("add#0: " + all_reduce_mp);  // attn.proj (row-parallel)
    expected.push_back("add#0: " + all_reduce_mp);  // mlp.down (row-parallel)
  }
  // mean_grad counts the reduced elements locally, so it wants its (shape-only) input whole;
  // its x_grad goes back to the batch split.
  expected.push_back("mean_grad#0: [0,-1,-1] -> [-1,-1,-1]");
  expected.push_back("cross_entropy_with_softmax_grad#2: [-1,-1,-1] -> [0,-1,-1]");
  // The residual stream's gradient, Partial over mp since the lm_head's matmul_grad, is
  // all-reduced before each row-parallel matmul_grad (mlp.down, then attn.proj, last layer
  // first) and before the embedding's gradient.
  for (int i = 0; i < 2 * kLayers; ++i) expected.push_back("matmul_grad#2: " + all_reduce_mp);
  expected.push_back("embedding_grad#2: " + all_reduce_mp);
  // The data-parallel all-reduce of every weight gradient, in parameter order.
  for (const Value* p : program_.Parameters()) {
    expected.push_back(absl::StrCat("adamw#1: ", Dist(program_.GradientOf(p)), " -> ", Dist(p)));
  }
  EXPECT_THAT(testing::ReshardLog(program_), ::testing::ElementsAreArray(expected));
  EXPECT_EQ(report_.reshards, static_cast<int64_t>(expected.size()));
  // One explanation per value.
  EXPECT_EQ(static_cast<int64_t>(report_.explanations.size()), ir::ValueNumbering(program_).size());
}

TEST_F(GptCompletionTest, CompletingAgainChangesNothing) {
  absl::StatusOr<CompletionReport> again = CompleteDistAttrs(program_);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->changed);
  EXPECT_EQ(again->reshards, 0);
}

// On one rank a reshard is the identity: the completed program computes exactly the serial one.
TEST(GptCompletionRunTest, CompletedProgramComputesTheSameStepOnOneRank) {
  absl::StatusOr<ir::Program> serial = BuildAnnotatedGpt();
  ASSERT_TRUE(serial.ok()) << serial.status();
  ir::Program completed = serial->Clone();
  ASSERT_TRUE(CompleteDistAttrs(completed).ok());

  exec::Feeds feeds = {
      {"tokens", testing::RandomTensor({{kConfig.batch, kConfig.seq_len}, ir::DataType::kInt64}, 1, 0, kConfig.vocab)},
      {"labels", testing::RandomTensor({{kConfig.batch, kConfig.seq_len}, ir::DataType::kInt64}, 2, 0, kConfig.vocab)},
      {"learning_rate", exec::Tensor::Scalar(ir::DataType::kFloat32, 1e-3)}};
  auto step = [&feeds](const ir::Program& p, exec::Workspace& ws) -> absl::StatusOr<double> {
    PDIST_ASSIGN_OR_RETURN(exec::Executor executor, exec::Executor::Create(p));
    PDIST_RETURN_IF_ERROR(exec::InitializeWorkspace(p, 7, ws));
    PDIST_ASSIGN_OR_RETURN(exec::RunResult r, executor.Run(feeds, ws));
    return r.loss;
  };
  exec::Workspace ws_serial, ws_completed;
  absl::StatusOr<double> loss_serial = step(*serial, ws_serial);
  absl::StatusOr<double> loss_completed = step(completed, ws_completed);
  ASSERT_TRUE(loss_serial.ok()) << loss_serial.status();
  ASSERT_TRUE(loss_completed.ok()) << loss_completed.status();
  EXPECT_EQ(*loss_serial, *loss_completed);
  for (const auto& [name, tensor] : ws_serial) {
    const std::vector<double> a = exec::TensorToDoubles(tensor), b = exec::TensorToDoubles(ws_completed.at(name));
    EXPECT_EQ(a, b) << name;
  }
}

}  // namespace
}  // namespace pdist::passes
