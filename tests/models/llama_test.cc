// LLaMA builder: RMSNorm, RoPE, SwiGLU, no biases; names, counts and config errors.
#include "ir/models/llama.h"

#include <string>

#include "absl/strings/match.h"
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

LlamaConfig Small() { return LlamaConfig{.vocab = 256, .hidden = 64, .layers = 2, .heads = 4, .seq_len = 32, .batch = 8}; }

TEST(LlamaTest, BuildsAVerifiedProgram) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
    LlamaConfig c = Small();
    c.dtype = dtype;
    absl::StatusOr<Program> p = BuildLlama(c);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_TRUE(VerifyProgram(*p).ok()) << VerifyProgram(*p);
    EXPECT_EQ(p->loss()->type(), (TensorType{{}, dtype}));
    EXPECT_EQ(Logits(*p)->type(), (TensorType{{8, 32, 256}, dtype}));
  }
}

TEST(LlamaTest, ArchitectureAndNames) {
  LlamaConfig c = Small();
  c.layers = 1;
  absl::StatusOr<Program> p = BuildLlama(c);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(ParameterNames(*p),
              ElementsAre("llama.wte", "llama.h.0.ln_1.weight", "llama.h.0.attn.qkv.weight",
                          "llama.h.0.attn.proj.weight", "llama.h.0.ln_2.weight", "llama.h.0.mlp.up.weight",
                          "llama.h.0.mlp.gate.weight", "llama.h.0.mlp.down.weight", "llama.ln_f.weight",
                          "llama.lm_head.weight"));
  for (const std::string& name : ParameterNames(*p)) EXPECT_FALSE(absl::EndsWith(name, ".bias")) << name;
  EXPECT_EQ(CountOps(*p, "rms_norm"), 3);
  EXPECT_EQ(CountOps(*p, "layer_norm"), 0);
  EXPECT_EQ(CountOps(*p, "silu"), 1);
  EXPECT_EQ(CountOps(*p, "gelu"), 0);
  // RoPE rotates q and k (not v) just before attention.
  const Operation* rope = FindOp(*p, "fused_rope");
  ASSERT_NE(rope, nullptr);
  EXPECT_EQ(rope->operand(0)->type().shape, (Shape{8, 32, 4, 16}));
  EXPECT_EQ(rope->num_operands(), 2u);  // q and k only: v is not rotated
  const Operation* attn = FindOp(*p, "flash_attn");
  EXPECT_EQ(attn->operand(0), rope->result(0));
  EXPECT_EQ(attn->operand(1), rope->result(1));
  EXPECT_DOUBLE_EQ(std::get<double>(rope->attrs().at("rotary_emb_base")), 10000.0);
  EXPECT_DOUBLE_EQ(std::get<double>(FindOp(*p, "rms_norm")->attrs().at("epsilon")), 1e-6);
}

TEST(LlamaTest, DefaultFfnIsTwoThirdsOfFourHRoundedToEight) {
  EXPECT_EQ(LlamaDefaultFfnHidden(64), 176);     // ceil(170.67) = 171 → 176
  EXPECT_EQ(LlamaDefaultFfnHidden(4096), 10928);  // LLaMA-7B rounds further, to 11008 (multiple of 256)
  EXPECT_EQ(LlamaDefaultFfnHidden(3), 8);
  absl::StatusOr<Program> p = BuildLlama(Small());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->FindArgument("llama.h.0.mlp.gate.weight")->type().shape, (Shape{64, 176}));
}

TEST(LlamaTest, ParameterCountClosedForm) {
  for (bool tied : {false, true}) {
    LlamaConfig c = Small();
    c.tied_embeddings = tied;
    c.ffn_hidden = 160;
    absl::StatusOr<Program> p = BuildLlama(c);
    ASSERT_TRUE(p.ok()) << p.status();
    const int64_t h = c.hidden, V = c.vocab, f = c.ffn_hidden, l = c.layers;
    const int64_t expected = V * h + l * (4 * h * h + 3 * h * f + 2 * h) + h + (tied ? 0 : h * V);
    EXPECT_EQ(CountParameters(*p), expected);
    EXPECT_EQ(LlamaParameterCount(c), expected);
  }
  // LLaMA-7B: 6,738,415,616 parameters (vocab 32000, h 4096, 32 layers, ffn 11008, untied).
  EXPECT_EQ(LlamaParameterCount({.vocab = 32000, .hidden = 4096, .layers = 32, .heads = 32, .ffn_hidden = 11008,
                                 .seq_len = 2048}),
            6738415616);
}

TEST(LlamaTest, BadConfigs) {
  LlamaConfig c = Small();
  c.heads = 3;
  EXPECT_THAT(std::string(BuildLlama(c).status().message()),
              HasSubstr("LlamaConfig.hidden (64) must be divisible by LlamaConfig.heads (3)"));
  c = Small();
  c.hidden = 12;
  c.heads = 4;  // head_dim 3: RoPE needs pairs
  EXPECT_EQ(ValidateLlamaConfig(c).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(ValidateLlamaConfig(c).message()), HasSubstr("head_dim 3"));
  c = Small();
  c.seq_len = 0;
  EXPECT_THAT(std::string(ValidateLlamaConfig(c).message()), HasSubstr("LlamaConfig.seq_len must be in [1, 16777216], got 0"));
}

}  // namespace
}  // namespace pdist::ir::models
