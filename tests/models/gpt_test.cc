// GPT builder: the program verifies, shapes and names are as documented, parameter counts match
// Megatron-LM's closed form, and bad configs are InvalidArgument naming the field.
#include "ir/models/gpt.h"

#include <cmath>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/models/model_stats.h"
#include "ir/verifier.h"
#include "tests/models/model_test_util.h"

namespace pdist::ir::models {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::CountOps;
using testing::FindOp;
using testing::Logits;
using testing::ParameterNames;

GptConfig Small() { return GptConfig{.vocab = 256, .hidden = 64, .layers = 2, .heads = 4, .seq_len = 32, .batch = 8}; }

TEST(GptTest, BuildsAVerifiedProgramWithScalarLoss) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
    GptConfig c = Small();
    c.dtype = dtype;
    absl::StatusOr<Program> p = BuildGpt(c);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_TRUE(VerifyProgram(*p).ok()) << VerifyProgram(*p);
    ASSERT_NE(p->loss(), nullptr);
    EXPECT_EQ(p->loss()->type(), (TensorType{{}, dtype}));
    EXPECT_EQ(p->FindArgument("tokens")->type(), (TensorType{{8, 32}, DataType::kInt64}));
    EXPECT_EQ(p->FindArgument("labels")->type(), (TensorType{{8, 32}, DataType::kInt64}));
    EXPECT_EQ(Logits(*p)->type(), (TensorType{{8, 32, 256}, dtype}));
    for (const Value* param : p->Parameters()) EXPECT_EQ(param->type().dtype, dtype) << param->name();
  }
}

TEST(GptTest, ParameterNamesShapesAndInits) {
  GptConfig c = Small();
  c.layers = 1;
  absl::StatusOr<Program> p = BuildGpt(c);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(ParameterNames(*p),
              ElementsAre("gpt.wte", "gpt.wpe", "gpt.h.0.ln_1.weight", "gpt.h.0.ln_1.bias", "gpt.h.0.attn.qkv.weight",
                          "gpt.h.0.attn.qkv.bias", "gpt.h.0.attn.proj.weight", "gpt.h.0.attn.proj.bias",
                          "gpt.h.0.ln_2.weight", "gpt.h.0.ln_2.bias", "gpt.h.0.mlp.up.weight", "gpt.h.0.mlp.up.bias",
                          "gpt.h.0.mlp.down.weight", "gpt.h.0.mlp.down.bias", "gpt.ln_f.weight", "gpt.ln_f.bias",
                          "gpt.lm_head.weight"));
  auto param = [&](const std::string& name) { return p->FindArgument(name); };
  EXPECT_EQ(param("gpt.wte")->type().shape, (Shape{256, 64}));
  EXPECT_EQ(param("gpt.wpe")->type().shape, (Shape{32, 64}));
  EXPECT_EQ(param("gpt.h.0.attn.qkv.weight")->type().shape, (Shape{64, 192}));
  EXPECT_EQ(param("gpt.h.0.mlp.up.weight")->type().shape, (Shape{64, 256}));
  EXPECT_EQ(param("gpt.h.0.mlp.down.weight")->type().shape, (Shape{256, 64}));
  EXPECT_EQ(param("gpt.lm_head.weight")->type().shape, (Shape{64, 256}));
  EXPECT_EQ(param("gpt.wte")->init(), "normal(0.02)");
  EXPECT_EQ(param("gpt.wpe")->init(), "normal(0.01)");
  EXPECT_EQ(param("gpt.h.0.attn.qkv.weight")->init(), "normal(0.02)");
  EXPECT_EQ(param("gpt.h.0.attn.qkv.bias")->init(), "zeros");
  EXPECT_EQ(param("gpt.h.0.ln_1.weight")->init(), "ones");
  EXPECT_EQ(param("gpt.h.0.ln_1.bias")->init(), "zeros");
  // Residual-stream projections: 0.02 / sqrt(2 · layers) = 0.02 / sqrt(2).
  EXPECT_EQ(param("gpt.h.0.attn.proj.weight")->init(), "normal(0.014142135623730949)");
  EXPECT_EQ(param("gpt.h.0.mlp.down.weight")->init(), "normal(0.014142135623730949)");
}

TEST(GptTest, BlockStructure) {
  absl::StatusOr<Program> p = BuildGpt(Small());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(CountOps(*p, "layer_norm"), 2 * 2 + 1);
  EXPECT_EQ(CountOps(*p, "flash_attn"), 2);
  EXPECT_EQ(CountOps(*p, "gelu"), 2);
  EXPECT_EQ(CountOps(*p, "dropout"), 0);  // dropout 0 adds no ops
  const Operation* attn = FindOp(*p, "flash_attn");
  EXPECT_EQ(attn->operand(0)->type().shape, (Shape{8, 32, 4, 16}));
  EXPECT_TRUE(std::get<bool>(attn->attrs().at("causal")));
  EXPECT_TRUE(std::get<bool>(FindOp(*p, "gelu")->attrs().at("approximate")));
}

TEST(GptTest, TiedHeadReusesTheTokenTable) {
  GptConfig c = Small();
  c.tied_embeddings = true;
  absl::StatusOr<Program> p = BuildGpt(c);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->FindArgument("gpt.lm_head.weight"), nullptr);
  const Operation* head = Logits(*p)->producer();
  ASSERT_EQ(head->type(), "matmul");
  EXPECT_EQ(head->operand(1), p->FindArgument("gpt.wte"));
  EXPECT_TRUE(std::get<bool>(head->attrs().at("trans_y")));
  EXPECT_EQ(Logits(*p)->type().shape, (Shape{8, 32, 256}));
}

// f32_loss: the loss reads the logits cast to f32 (Megatron-LM's output.float()); the logits
// output stays the model's dtype, and an f32 model gets no cast.
TEST(GptTest, F32LossCastsTheLogitsOfALowPrecisionModel) {
  GptConfig c = Small();
  c.dtype = DataType::kBFloat16;
  c.f32_loss = true;
  absl::StatusOr<Program> p = BuildGpt(c);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(VerifyProgram(*p).ok()) << VerifyProgram(*p);
  // The loss reads a cast to f32 of the bf16 logits.
  const Value* loss_input = Logits(*p);
  ASSERT_NE(loss_input, nullptr);
  EXPECT_EQ(loss_input->type().dtype, DataType::kFloat32);
  const Operation* cast = loss_input->producer();
  ASSERT_EQ(cast->type(), "cast");
  EXPECT_EQ(cast->operand(0)->type().dtype, DataType::kBFloat16);
  EXPECT_EQ(cast->operand(0)->type().shape, loss_input->type().shape);
  EXPECT_EQ(cast->operand(0)->producer()->type(), "matmul");
  // No softmax is kept: the backward writes its gradient over the f32 copy.
  const Operation* ce = FindOp(*p, "cross_entropy_with_softmax");
  EXPECT_EQ(ce->result(0)->type().num_elements(), 0);

  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {  // no cast, no downcast
    c.dtype = dtype;
    p = BuildGpt(c);
    ASSERT_TRUE(p.ok()) << p.status();
    for (const auto& op : p->block().ops()) EXPECT_NE(op->type(), "cast");
  }
}

TEST(GptTest, DropoutAddsOpsAndStillVerifies) {
  GptConfig c = Small();
  c.dropout = 0.1;
  absl::StatusOr<Program> p = BuildGpt(c);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(VerifyProgram(*p).ok()) << VerifyProgram(*p);
  EXPECT_EQ(CountOps(*p, "dropout"), 1 + 2 * 2);  // embedding + two residual branches per layer
  EXPECT_DOUBLE_EQ(std::get<double>(FindOp(*p, "flash_attn")->attrs().at("dropout")), 0.0);  // separate
  c.attention_dropout = 0.2;
  p = BuildGpt(c);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(std::get<double>(FindOp(*p, "flash_attn")->attrs().at("dropout")), 0.2);
}

// Megatron-LM eq. 2 (arXiv:2104.04473): P = 12·l·h²·(1 + 13/(12h) + (V+s)/(12·l·h)) for a tied
// model with ffn = 4h. Our GPT has exactly 2h more: the final LayerNorm, which eq. 2 omits.
double MegatronEq2(double l, double h, double V, double s) {
  return 12 * l * h * h * (1 + 13 / (12 * h) + (V + s) / (12 * l * h));
}

TEST(GptTest, TiedParameterCountIsMegatronEq2PlusFinalLayerNorm) {
  for (GptConfig c : {GptConfig{.vocab = 256, .hidden = 64, .layers = 2, .heads = 4, .seq_len = 32, .batch = 2},
                      GptConfig{.vocab = 1000, .hidden = 96, .layers = 3, .heads = 6, .seq_len = 17, .batch = 1},
                      GptConfig{.vocab = 50257, .hidden = 768, .layers = 12, .heads = 12, .seq_len = 1024, .batch = 1}}) {
    c.tied_embeddings = true;
    absl::StatusOr<Program> p = BuildGpt(c);
    ASSERT_TRUE(p.ok()) << p.status();
    const int64_t l = c.layers, h = c.hidden, V = c.vocab, s = c.seq_len;
    const int64_t expanded = 12 * l * h * h + 13 * l * h + (V + s) * h;  // eq. 2 multiplied out
    EXPECT_NEAR(MegatronEq2(l, h, V, s), static_cast<double>(expanded), 1e-6 * expanded);
    EXPECT_EQ(CountParameters(*p), expanded + 2 * h) << "hidden " << h;
    EXPECT_EQ(GptParameterCount(c), CountParameters(*p));
    EXPECT_EQ(CountTrainableParameters(*p), CountParameters(*p));
  }
  // GPT-2 small: the well-known 124,439,808 parameters (tied, with the final LayerNorm).
  EXPECT_EQ(GptParameterCount({.vocab = 50257, .hidden = 768, .layers = 12, .heads = 12, .seq_len = 1024,
                               .tied_embeddings = true}),
            124439808);
}

// Table 1 of the same paper: eq. 2 gives every published size to 0.1 B, and so does our count.
TEST(GptTest, ReproducesMegatronTable1Sizes) {
  struct Row { double billions; int64_t heads, hidden, layers; };
  for (const Row& r : {Row{1.7, 24, 2304, 24}, Row{3.6, 32, 3072, 30}, Row{7.5, 32, 4096, 36},
                       Row{18.4, 48, 6144, 40}, Row{39.1, 64, 8192, 48}, Row{76.1, 80, 10240, 60},
                       Row{145.6, 96, 12288, 80}, Row{310.1, 128, 16384, 96}, Row{529.6, 128, 20480, 105},
                       Row{1008.0, 160, 25600, 128}}) {
    const GptConfig c{.vocab = 51200, .hidden = r.hidden, .layers = r.layers, .heads = r.heads, .seq_len = 2048,
                      .batch = 1, .tied_embeddings = true};
    absl::StatusOr<Program> p = BuildGpt(c);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_NEAR(static_cast<double>(CountParameters(*p)) / 1e9, r.billions, 0.05) << r.billions << " B";
  }
}

TEST(GptTest, UntiedAddsTheHeadAndCustomFfnIsUsed) {
  GptConfig c = Small();
  c.ffn_hidden = 100;
  absl::StatusOr<Program> p = BuildGpt(c);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->FindArgument("gpt.h.1.mlp.up.weight")->type().shape, (Shape{64, 100}));
  EXPECT_EQ(CountParameters(*p), GptParameterCount(c));
  GptConfig tied = c;
  tied.tied_embeddings = true;
  EXPECT_EQ(GptParameterCount(c) - GptParameterCount(tied), c.hidden * c.vocab);
}

TEST(GptTest, BadConfigsNameTheFieldAndValue) {
  auto error = [](GptConfig c) {
    absl::StatusOr<Program> p = BuildGpt(c);
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(ValidateGptConfig(c), p.status());
    return std::string(p.status().message());
  };
  GptConfig c = Small();
  c.heads = 5;
  EXPECT_THAT(error(c), HasSubstr("GptConfig.hidden (64) must be divisible by GptConfig.heads (5)"));
  c = Small();
  c.layers = 0;
  EXPECT_THAT(error(c), HasSubstr("GptConfig.layers must be in [1, 16384], got 0"));
  c = Small();
  c.vocab = -3;
  EXPECT_THAT(error(c), HasSubstr("GptConfig.vocab must be in [1, 16777216], got -3"));
  c = Small();
  c.ffn_hidden = -1;
  EXPECT_THAT(error(c), HasSubstr("GptConfig.ffn_hidden must be in [1, 16777216], got -1"));
  c = Small();
  c.batch = 0;
  EXPECT_THAT(error(c), HasSubstr("GptConfig.batch"));
  // Absurd sizes are refused before any tensor type is formed.
  c = Small();
  c.layers = 1000000000;
  EXPECT_THAT(error(c), HasSubstr("GptConfig.layers must be in [1, 16384], got 1000000000"));
  c = Small();
  c.vocab = int64_t{1} << 40;
  EXPECT_THAT(error(c), HasSubstr("GptConfig.vocab must be in [1, 16777216], got 1099511627776"));
  c = Small();
  c.dropout = 1.0;
  EXPECT_THAT(error(c), HasSubstr("GptConfig.dropout must be in [0, 1), got 1"));
  c = Small();
  c.dtype = DataType::kInt64;
  EXPECT_THAT(error(c), HasSubstr("GptConfig.dtype must be floating point (f32 or f64), got i64"));
}

}  // namespace
}  // namespace pdist::ir::models
