// AnnotateFromStrategy: the Megatron layout of GPT and LLaMA found from the ops alone (the same
// as the name-based preset, also after every name is changed), sequence parallelism's reshards
// after completion, and the errors.
#include "passes/annotate_from_strategy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "ir/builder.h"
#include "ir/dist/shard_tensor.h"
#include "ir/models/gpt.h"
#include "ir/models/llama.h"
#include "ir/printer.h"
#include "ir/status.h"
#include "ir/verifier.h"
#include "passes/annotate.h"
#include "passes/autodiff.h"
#include "passes/completion.h"
#include "passes/optimizer.h"
#include "passes/pass_registry.h"
#include "strategy/presets.h"
#include "tests/passes/dist_testing.h"

namespace pdist::passes {
namespace {

using ir::Operation;
using ir::Value;
using testing::Dist;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

constexpr int kLayers = 2;
const ir::models::GptConfig kGpt{.vocab = 64, .hidden = 32, .layers = kLayers, .heads = 4, .seq_len = 8, .batch = 4};
const ir::models::LlamaConfig kLlama{
    .vocab = 64, .hidden = 32, .layers = kLayers, .heads = 4, .seq_len = 8, .batch = 2};

ir::Program Gpt(const ir::models::GptConfig& config = kGpt) {
  absl::StatusOr<ir::Program> p = ir::models::BuildGpt(config);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *std::move(p) : ir::Program();
}

ir::Program Llama(const ir::models::LlamaConfig& config = kLlama) {
  absl::StatusOr<ir::Program> p = ir::models::BuildLlama(config);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *std::move(p) : ir::Program();
}

strategy::Strategy Degrees(int64_t dp, int64_t mp, bool sp = false) {
  strategy::Strategy s;
  s.dp_degree = dp;
  s.mp_degree = mp;
  s.sp = sp;
  return s;
}

// autodiff, adamw and completion, as the engine runs them after annotation.
absl::Status Train(ir::Program& p) {
  PDIST_RETURN_IF_ERROR(AppendBackward(p, p.loss()));
  PDIST_RETURN_IF_ERROR(AppendOptimizer(p, {}));
  PDIST_RETURN_IF_ERROR(CompleteDistAttrs(p).status());
  return ir::VerifyProgram(p);
}

// "[-1,1] annotated on [2,2] [dp,mp]" — what a test compares per argument.
std::string Annotation(const Value* v) {
  if (!v->dist_attr()) return "none";
  return absl::StrCat(Dist(v), v->dist_annotated() ? " annotated" : "", " on ", v->dist_attr()->mesh.ToString());
}

// Every block argument's annotation, by position: independent of names.
std::vector<std::string> ArgumentAnnotations(const ir::Program& p) {
  std::vector<std::string> out;
  for (const Value* v : p.block().arguments()) out.push_back(Annotation(v));
  return out;
}

// The program annotated by name with the Megatron preset, for comparison.
ir::Program PresetGpt(int64_t dp, int64_t mp) {
  ir::Program p = Gpt();
  strategy::Strategy s = Degrees(dp, mp);
  s.annotations = strategy::MegatronGptAnnotations(ir::ProcessMesh::Range({dp, mp}, {"dp", "mp"}));
  EXPECT_TRUE(ApplyAnnotations(s, p).ok());
  return p;
}

// The reshards of activations and their gradients: not the parameter gradients read by AdamW.
std::vector<std::string> ActivationReshards(const ir::Program& program) { return testing::ReshardLog(program, "adamw"); }

// Each activation reshard on the mp axis (mesh dim 1) of a [b, s, h] value is a reduce_scatter
// (Partial → Shard(1)) or an all_gather (Shard(1) → Replicate): never an all_reduce.
void ExpectOnlyReduceScatterAndAllGatherOnMp(const ir::Program& p) {
  for (const ir::Operation* op : testing::ReshardOps(p)) {
    const ir::DistAttr& from = *op->operand(0)->dist_attr();
    const ir::DistAttr& to = *op->result(0)->dist_attr();
    const bool partial_mp = from.partial.contains(1),
               seq_from = from.dims_mapping.size() == 3 && from.dims_mapping[1] == 1;
    const bool seq_to = to.dims_mapping.size() == 3 && to.dims_mapping[1] == 1;
    if (op->operand(0)->type().rank() != 3) continue;  // a weight gradient or the loss
    const bool reduce_scatter = partial_mp && !seq_from && seq_to;
    const bool all_gather = !partial_mp && seq_from && !seq_to;
    const bool untouched_mp = !partial_mp && seq_from == seq_to;  // along dp only
    EXPECT_TRUE(reduce_scatter || all_gather || untouched_mp) << testing::ReshardSummary(*op);
  }
}

TEST(AnnotateFromStrategyTest, GptGetsTheMegatronPresetLayout) {
  ir::Program preset = PresetGpt(2, 2);
  ir::Program found = Gpt();
  ASSERT_TRUE(AnnotateFromStrategy(Degrees(2, 2), found).ok());
  for (size_t i = 0; i < found.block().arguments().size(); ++i) {
    const Value* v = found.block().arguments()[i];
    EXPECT_EQ(Annotation(v), Annotation(preset.block().arguments()[i])) << v->name();
  }
  EXPECT_EQ(Annotation(found.FindArgument("gpt.h.1.attn.qkv.weight")), "[-1,1] annotated on [2,2] [dp,mp]");
  EXPECT_EQ(Annotation(found.FindArgument("gpt.h.1.mlp.down.weight")), "[1,-1] annotated on [2,2] [dp,mp]");
  EXPECT_EQ(Annotation(found.FindArgument("tokens")), "[0,-1] annotated on [2,2] [dp,mp]");
  EXPECT_EQ(Annotation(found.FindArgument("gpt.wpe")), "none");  // left to completion

  // And so the completed training programs are identical, value for value.
  ASSERT_TRUE(Train(preset).ok());
  ASSERT_TRUE(Train(found).ok());
  EXPECT_EQ(ir::PrintProgram(found), ir::PrintProgram(preset));
}

TEST(AnnotateFromStrategyTest, NamesAreNotUsed) {
  ir::Program preset = PresetGpt(2, 2);
  const ir::Program source = Gpt();
  ir::Program renamed = source.Clone();
  int64_t n = 0;
  for (Value* v : renamed.block().arguments())
    v->set_name(absl::StrCat(v->role() == ir::ValueRole::kParameter ? "p" : "d", n++));
  ASSERT_EQ(renamed.FindArgument("tokens"), nullptr);
  absl::StatusOr<StrategyAnnotationPlan> plan = AnnotateFromStrategyExplained(Degrees(2, 2), renamed);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->annotations.size(), 2 + 1 + kLayers * 6 + 1);  // data, wte, per layer qkv w/b proj up w/b down, head
  EXPECT_THAT(ArgumentAnnotations(renamed), ElementsAreArray(ArgumentAnnotations(preset)));
  ASSERT_TRUE(Train(preset).ok());
  ASSERT_TRUE(Train(renamed).ok());
  for (size_t i = 0; i < preset.block().arguments().size(); ++i) {
    EXPECT_EQ(Annotation(renamed.block().arguments()[i]), Annotation(preset.block().arguments()[i])) << i;
  }
}

// Dropout on the embedding, the attention probabilities and both residual branches does not
// hide the layers; with sp, the dropouts run on the sequence shard.
TEST(AnnotateFromStrategyTest, DropoutDoesNotHideTheLayers) {
  ir::models::GptConfig config = kGpt;
  config.dropout = 0.1;
  ir::Program preset = Gpt(config);
  strategy::Strategy s = Degrees(2, 2);
  s.annotations = strategy::MegatronGptAnnotations(ir::ProcessMesh::Range({2, 2}, {"dp", "mp"}));
  ASSERT_TRUE(ApplyAnnotations(s, preset).ok());
  ir::Program found = Gpt(config);
  ASSERT_TRUE(AnnotateFromStrategy(Degrees(2, 2), found).ok());
  EXPECT_THAT(ArgumentAnnotations(found), ElementsAreArray(ArgumentAnnotations(preset)));

  ir::Program sp = Gpt(config);
  ASSERT_TRUE(AnnotateFromStrategy(Degrees(2, 2, true), sp).ok());
  ASSERT_TRUE(Train(sp).ok());
  ExpectOnlyReduceScatterAndAllGatherOnMp(sp);
  for (const auto& op : sp.block().ops()) {
    if (op->type() == "dropout" && op->operand(0)->type().rank() == 3 && op->operand(0)->type().shape[2] == 32) {
      EXPECT_EQ(Dist(op->result(0)), "[0,1,-1]");  // embedding and residual-branch dropouts
    }
  }
}

TEST(AnnotateFromStrategyTest, PlanSaysWhy) {
  ir::Program p = Gpt();
  absl::StatusOr<StrategyAnnotationPlan> plan = PlanStrategyAnnotations(Degrees(2, 2), p);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->mesh.ToString(), "[2,2] [dp,mp]");
  std::map<std::string, std::string> why;
  for (const StrategyAnnotation& a : plan->annotations) why[a.value->name()] = a.reason;
  EXPECT_THAT(why["gpt.h.0.attn.qkv.weight"], HasSubstr("column-parallel: %"));
  EXPECT_THAT(why["gpt.h.0.attn.qkv.weight"], HasSubstr("layer_norm"));
  EXPECT_THAT(why["gpt.h.0.attn.proj.weight"], HasSubstr("row-parallel"));
  EXPECT_THAT(why["gpt.wte"], HasSubstr("vocab-parallel: the table of %"));
  EXPECT_THAT(why["gpt.lm_head.weight"], HasSubstr("LM head"));
  EXPECT_FALSE(p.FindArgument("gpt.wte")->dist_attr());  // planning changes nothing
}

TEST(AnnotateFromStrategyTest, LlamaColumnAndRowParallelWeights) {
  ir::Program p = Llama();
  ASSERT_TRUE(AnnotateFromStrategy(Degrees(1, 2), p).ok());
  const std::string column = "[-1,1] annotated on [1,2] [dp,mp]", row = "[1,-1] annotated on [1,2] [dp,mp]";
  for (int i = 0; i < kLayers; ++i) {
    SCOPED_TRACE(i);
    auto layer = [i](const std::string& rest) { return absl::StrCat("llama.h.", i, ".", rest); };
    EXPECT_EQ(Annotation(p.FindArgument(layer("attn.qkv.weight"))), column);  // fused q, k, v
    EXPECT_EQ(Annotation(p.FindArgument(layer("mlp.gate.weight"))), column);
    EXPECT_EQ(Annotation(p.FindArgument(layer("mlp.up.weight"))), column);
    EXPECT_EQ(Annotation(p.FindArgument(layer("attn.proj.weight"))), row);
    EXPECT_EQ(Annotation(p.FindArgument(layer("mlp.down.weight"))), row);
    EXPECT_EQ(Annotation(p.FindArgument(layer("ln_1.weight"))), "none");
  }
  EXPECT_EQ(Annotation(p.FindArgument("llama.wte")), row);
  EXPECT_EQ(Annotation(p.FindArgument("llama.lm_head.weight")), column);
  // dp of degree 1: the batch is not split (no Shard along an axis of one process).
  EXPECT_EQ(Annotation(p.FindArgument("tokens")), "[-1,-1] annotated on [1,2] [dp,mp]");

  // Completed: whole heads per rank through rope and attention; in the forward, one all-reduce
  // per row-parallel layer and one for the embedding. (Without biases the residual stream stays
  // Partial until the next norm, so each all-reduce sits before a norm.)
  ASSERT_TRUE(Train(p).ok());
  int64_t forward_reshards = 0;
  for (const auto& op : p.block().ops()) {
    if (op->num_results() > 0 && op->result(0)->role() == ir::ValueRole::kGradient) break;  // the backward
    if (op->type() == "flash_attn" || op->type() == "fused_rope") {
      EXPECT_EQ(Dist(op->result(0)), "[-1,-1,1,-1]");
    }
    if (op->type() == "reshard") {
      ++forward_reshards;
      EXPECT_EQ(testing::ReshardSummary(*op), "[-1,-1,-1] {1: sum} -> [-1,-1,-1]");
    }
  }
  EXPECT_EQ(forward_reshards, 1 + 2 * kLayers);
}

TEST(AnnotateFromStrategyTest, TiedHeadIsTheVocabParallelTable) {
  ir::models::GptConfig config = kGpt;
  config.tied_embeddings = true;
  ir::Program p = Gpt(config);
  ASSERT_TRUE(AnnotateFromStrategy(Degrees(2, 2), p).ok());
  EXPECT_EQ(Annotation(p.FindArgument("gpt.wte")), "[1,-1] annotated on [2,2] [dp,mp]");
  ASSERT_TRUE(Train(p).ok());
  for (const auto& op : p.block().ops()) {
    if (op->type() == "cross_entropy_with_softmax") {
      EXPECT_EQ(Dist(op->operand(0)), "[0,-1,1]");  // vocab-split logits
    }
  }
}

TEST(AnnotateFromStrategyTest, SequenceParallelReshardsAreReduceScatterAndAllGather) {
  ir::Program p = Gpt();
  absl::StatusOr<StrategyAnnotationPlan> plan = AnnotateFromStrategyExplained(Degrees(2, 2, true), p);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // Per layer: 2 norms (input and output) and 2 row-parallel outputs; plus the final norm and the
  // embedding; the data inputs and the tensor-parallel weights as without sp.
  EXPECT_EQ(plan->annotations.size(), 2 + 1 + kLayers * 6 + 1 + (kLayers * 6 + 2 + 1));
  ASSERT_TRUE(Train(p).ok());

  // On mesh [dp, mp] a [b, s, h] activation: batch over dp, the sequence over mp.
  const std::string seq = "[0,1,-1]", whole = "[0,-1,-1]", partial = "[0,-1,-1] {1: sum}";
  const std::string reduce_scatter = partial + " -> " + seq, all_gather = seq + " -> " + whole;
  // Forward. layer_norm's statistics keep both leading axes sharded (docs/spmd-nn.md), so the
  // norms run on the sequence shard and each all_gather lands between a norm and the
  // column-parallel matmul it feeds, as in Megatron-LM.
  std::vector<std::string> expected = {"add#0: " + reduce_scatter};  // embedding, before + wpe
  for (int i = 0; i < kLayers; ++i) {
    for (int sub = 0; sub < 2; ++sub) {               // attention, then the MLP
      expected.push_back("matmul#0: " + all_gather);  // ln_1 / ln_2's output, into qkv / up
      expected.push_back("add#0: " + reduce_scatter);  // proj / down, before its bias
    }
  }
  expected.push_back("matmul#0: " + all_gather);  // ln_f's output, into the head
  // Backward: the loss (along dp only, as without sp), then the mirror image: the gradient of a
  // gather is a reduce_scatter (before each norm's gradient, which runs on the shard), the
  // gradient of a reduce_scatter a gather (before each row-parallel matmul_grad and the
  // embedding's gradient).
  expected.push_back("mean_grad#0: [0,-1,-1] -> [-1,-1,-1]");
  expected.push_back("cross_entropy_with_softmax_grad#2: [-1,-1,-1] -> [0,-1,-1]");
  expected.push_back("layer_norm_grad#5: " + reduce_scatter);  // ln_f's gradient
  for (int i = 0; i < 2 * kLayers; ++i) {
    expected.push_back("matmul_grad#2: " + all_gather);
    expected.push_back("layer_norm_grad#5: " + reduce_scatter);
  }
  expected.push_back("embedding_grad#2: " + all_gather);
  EXPECT_THAT(ActivationReshards(p), ElementsAreArray(expected));
  ExpectOnlyReduceScatterAndAllGatherOnMp(p);
}

// With a batch of 1 as with more (above): layer_norm runs on its shard, and the all_gather is
// on its output, right before the column-parallel matmul (Megatron-LM's place).
TEST(AnnotateFromStrategyTest, SequenceParallelNormRunsShardedWhenItsRuleAllows) {
  ir::Program p = Gpt({.vocab = 64, .hidden = 32, .layers = 1, .heads = 4, .seq_len = 8, .batch = 1});
  ASSERT_TRUE(AnnotateFromStrategy(Degrees(1, 2, true), p).ok());
  ASSERT_TRUE(Train(p).ok());
  const std::string seq = "[-1,1,-1]", whole = "[-1,-1,-1]", partial = "[-1,-1,-1] {1: sum}";
  const std::string reduce_scatter = partial + " -> " + seq, all_gather = seq + " -> " + whole;
  std::vector<std::string> forward = {"add#0: " + reduce_scatter, "matmul#0: " + all_gather,
                                      "add#0: " + reduce_scatter, "matmul#0: " + all_gather,
                                      "add#0: " + reduce_scatter, "matmul#0: " + all_gather};
  std::vector<std::string> log = ActivationReshards(p);
  ASSERT_GE(log.size(), forward.size());
  EXPECT_THAT(std::vector<std::string>(log.begin(), log.begin() + static_cast<ptrdiff_t>(forward.size())),
              ElementsAreArray(forward));
  for (const auto& op : p.block().ops()) {
    if (op->type() == "layer_norm") {
      EXPECT_EQ(Dist(op->operand(0)), seq);
    }
  }
  ExpectOnlyReduceScatterAndAllGatherOnMp(p);
}

// LLaMA (no biases; gate and up read one norm): the same pattern, one gather per norm.
TEST(AnnotateFromStrategyTest, SequenceParallelLlama) {
  ir::Program p = Llama();
  ASSERT_TRUE(AnnotateFromStrategy(Degrees(1, 2, true), p).ok());
  ASSERT_TRUE(Train(p).ok());
  ExpectOnlyReduceScatterAndAllGatherOnMp(p);
  // Forward: the embedding's reduce_scatter, per layer 2 gathers and 2 reduce_scatters, the final
  // norm's gather; the backward mirrors it.
  EXPECT_EQ(ActivationReshards(p).size(), 2 * (2 + 4 * kLayers));
}

TEST(AnnotateFromStrategyTest, ExplicitAnnotationsWin) {
  ir::Program p = Gpt();
  strategy::Strategy s = Degrees(2, 2);
  s.annotations.push_back({"gpt.h.0.attn.qkv.weight",
                           ir::ProcessMesh::Range({2, 2}, {"dp", "mp"}),
                           {ir::Placement::Replicate(), ir::Placement::Replicate()}});
  ASSERT_TRUE(AnnotateFromStrategy(s, p).ok());
  EXPECT_EQ(Annotation(p.FindArgument("gpt.h.0.attn.qkv.weight")), "[-1,-1] annotated on [2,2] [dp,mp]");
  EXPECT_EQ(Annotation(p.FindArgument("gpt.h.1.attn.qkv.weight")), "[-1,1] annotated on [2,2] [dp,mp]");
}

TEST(AnnotateFromStrategyTest, ValuesTheProgramAnnotatesAreKept) {
  ir::Program p = Gpt();
  Value* wte = p.FindArgument("gpt.wte");
  ASSERT_TRUE(ir::ShardTensor(wte, ir::ProcessMesh::Range({2, 2}, {"dp", "mp"}),
                              {ir::Placement::Replicate(), ir::Placement::Replicate()})
                  .ok());
  absl::StatusOr<StrategyAnnotationPlan> plan = AnnotateFromStrategyExplained(Degrees(2, 2), p);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Annotation(wte), "[-1,-1] annotated on [2,2] [dp,mp]");
  EXPECT_THAT(plan->notes, ::testing::Contains(HasSubstr("'gpt.wte': kept as the program annotates it")));
}

TEST(AnnotateFromStrategyTest, OneByOneMeshReplicatesTheData) {
  ir::Program p = Gpt();
  ASSERT_TRUE(AnnotateFromStrategy(Degrees(1, 1), p).ok());
  EXPECT_EQ(Annotation(p.FindArgument("tokens")), "[-1,-1] annotated on [1,1] [dp,mp]");
  EXPECT_EQ(Annotation(p.FindArgument("gpt.wte")), "none");
}

TEST(AnnotateStrategyPassTest, RunsFromAPipelineAndExplains) {
  absl::StatusOr<std::unique_ptr<Pass>> pass =
      PassRegistry::Global().Create({"annotate-strategy", {{"dp", "2"}, {"mp", "2"}, {"sp", "1"}}});
  ASSERT_TRUE(pass.ok()) << pass.status();
  EXPECT_EQ((*pass)->options(), (PassOptions{{"dp", "2"}, {"mp", "2"}, {"sp", "true"}}));
  ir::Program p = Gpt();
  PassContext context;
  absl::StatusOr<bool> changed = (*pass)->Run(p, context);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  ASSERT_FALSE(context.explanations.empty());
  EXPECT_EQ(context.explanations[0], "annotate-strategy: 31 values annotated on mesh [2,2] [dp,mp]");
  EXPECT_THAT(context.explanations,
              ::testing::Contains(HasSubstr("'gpt.wte' [Replicate(), Shard(0)] ← vocab-parallel")));

  EXPECT_THAT(PassRegistry::Global().Create({"annotate-strategy", {{"tp", "2"}}}).status().message(),
              HasSubstr("no option 'tp'"));
  EXPECT_THAT(PassRegistry::Global().Create({"annotate-strategy", {{"mp", "0"}}}).status().message(),
              HasSubstr("option 'mp' must be >= 1, got 0"));
}

// Stages are cut first (passes/pipeline_stages.h), which then plans each one with pp 1.
TEST(AnnotateFromStrategyErrorTest, StagesArePlannedOneAtATime) {
  ir::Program p = Gpt();
  strategy::Strategy s = Degrees(1, 2);
  s.pp_degree = 2;
  absl::Status status = AnnotateFromStrategy(s, p);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("AnnotatePipelineStages"));
}

TEST(AnnotateFromStrategyErrorTest, HeadsNotDivisibleNameTheTensor) {
  // 144 qkv columns divide by 3, but 4 heads do not.
  ir::Program p = Gpt({.vocab = 96, .hidden = 48, .layers = 1, .heads = 4, .seq_len = 6, .batch = 2});
  absl::Status status = AnnotateFromStrategy(Degrees(1, 3), p);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("'gpt.h.0.attn.qkv.weight'"));
  EXPECT_THAT(status.message(), HasSubstr("the heads, size 4) is not divisible by mp_degree 3"));
  for (const Value* v : p.block().arguments()) EXPECT_FALSE(v->dist_attr()) << v->name();  // all or nothing
}

TEST(AnnotateFromStrategyErrorTest, SizesNotDivisibleNameTheTensor) {
  ir::Program vocab = Gpt({.vocab = 65, .hidden = 32, .layers = 1, .heads = 4, .seq_len = 8, .batch = 4});
  absl::Status status = AnnotateFromStrategy(Degrees(1, 2), vocab);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("vocab-parallel embedding table %2 'gpt.wte' f32[65,32]: dim 0 (the "
                                          "vocabulary, size 65) is not divisible by mp_degree 2"));

  ir::Program batch = Gpt({.vocab = 64, .hidden = 32, .layers = 1, .heads = 4, .seq_len = 8, .batch = 3});
  status = AnnotateFromStrategy(Degrees(2, 1), batch);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("'tokens' i64[3,8]: dim 0 (the batch, size 3) is not divisible by dp_degree 2"));

  ir::Program seq = Gpt({.vocab = 64, .hidden = 32, .layers = 1, .heads = 4, .seq_len = 7, .batch = 4});
  status = AnnotateFromStrategy(Degrees(1, 2, true), seq);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("(the sequence, size 7) is not divisible by mp_degree 2"));
}

TEST(AnnotateFromStrategyErrorTest, BadStrategiesAndPrograms) {
  ir::Program p = Gpt();
  EXPECT_EQ(AnnotateFromStrategy(Degrees(2, 1, true), p).code(), absl::StatusCode::kInvalidArgument);  // sp, mp 1

  // A matmul and a relu: nothing tensor-parallel to find.
  ir::Program plain;
  ir::Builder b(&plain);
  Value* x = b.Data("x", {{8, 16}, ir::DataType::kFloat32});
  Value* w = b.Parameter("w", {{16, 16}, ir::DataType::kFloat32}, "normal(0.02)");
  absl::StatusOr<Value*> y = b.Op1("matmul", {x, w});
  ASSERT_TRUE(y.ok()) << y.status();
  absl::StatusOr<Value*> r = b.Op1("relu", {*y});
  ASSERT_TRUE(r.ok()) << r.status();
  absl::StatusOr<Value*> loss = b.Op1("mean", {*r});
  ASSERT_TRUE(loss.ok()) << loss.status();
  plain.set_loss(*loss);
  absl::Status status = AnnotateFromStrategy(Degrees(1, 2), plain);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("no tensor-parallel layer"));

  ASSERT_TRUE(AppendBackward(p, p.loss()).ok());
  EXPECT_EQ(AnnotateFromStrategy(Degrees(2, 2), p).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(AnnotateFromStrategyErrorTest, AFailingExplicitAnnotationUndoesEverything) {
  ir::Program p = Gpt();
  strategy::Strategy s = Degrees(2, 2);
  s.annotations.push_back({"no.such.tensor",
                           ir::ProcessMesh::Range({2, 2}, {"dp", "mp"}),
                           {ir::Placement::Replicate(), ir::Placement::Replicate()}});
  absl::Status status = AnnotateFromStrategy(s, p);
  EXPECT_THAT(status.message(), HasSubstr("matches no block argument"));
  for (const Value* v : p.block().arguments()) EXPECT_FALSE(v->dist_attr()) << v->name();
}

}  // namespace
}  // namespace pdist::passes
