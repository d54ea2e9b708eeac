// Which form runs attention on a GPU (executor/cuda/attention_choice.h): plain rules, checked on
// every machine, since the forms themselves run only where a GPU is.
#include "executor/cuda/attention_choice.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace pdist::exec::cuda {
namespace {

// The 1.3B GPT's attention: bf16, head_dim 128, causal, no mask, no dropout.
AttentionCase Gpt() {
  return {.low_precision = true, .head_dim = 128, .v_dim = 128, .causal = true, .seq_q = 2048, .seq_k = 2048};
}

TEST(AttentionChoiceTest, CudnnRunsTheModelsAttentionUnlessToldOtherwise) {
  EXPECT_EQ(ChooseAttention(Gpt(), "", true).form, AttentionForm::kCudnn);
  EXPECT_EQ(ChooseAttention(Gpt(), "auto", true).form, AttentionForm::kCudnn);
  EXPECT_EQ(ChooseAttention(Gpt(), "cudnn", true).form, AttentionForm::kCudnn);
  EXPECT_EQ(ChooseAttention(Gpt(), "gemm", true).form, AttentionForm::kGemm);
  EXPECT_TRUE(ChooseAttention(Gpt(), "", true).error.empty());
}

TEST(AttentionChoiceTest, WhatCudnnDoesNotComputeRunsAsGemms) {
  // Each case: the GPT's attention with one thing changed, and what the reason must name.
  const std::vector<std::pair<std::function<void(AttentionCase&)>, std::string>> changes = {
      {[](AttentionCase& c) { c.low_precision = false; }, "bf16 or f16 only"},
      {[](AttentionCase& c) { c.dropout = true; }, "dropout"},
      {[](AttentionCase& c) { c.mask = true; }, "attn_mask"},
      {[](AttentionCase& c) { c.return_softmax = true; }, "return_softmax"},
      {[](AttentionCase& c) { c.v_dim = 64; }, "v's head_dim"},
      {[](AttentionCase& c) { c.head_dim = c.v_dim = 100; }, "multiple of 8"},
      {[](AttentionCase& c) { c.head_dim = c.v_dim = 256; }, "up to 128"},
      {[](AttentionCase& c) { c.seq_q = 9, c.seq_k = 5; }, "more queries than keys"},
  };
  for (const auto& [change, why] : changes) {
    SCOPED_TRACE(why);
    AttentionCase attention = Gpt();
    change(attention);
    const AttentionChoice automatic = ChooseAttention(attention, "", true);
    EXPECT_EQ(automatic.form, AttentionForm::kGemm);
    EXPECT_TRUE(automatic.error.empty()) << "auto falls back without an error";
    const AttentionChoice insisted = ChooseAttention(attention, "cudnn", true);
    EXPECT_NE(insisted.error.find(why), std::string::npos) << insisted.error;
  }
}

TEST(AttentionChoiceTest, FewerQueriesThanKeysTakeCudnnAndMoreDoWithoutTheMask) {
  AttentionCase c = Gpt();
  c.seq_q = 5;
  c.seq_k = 9;
  EXPECT_EQ(ChooseAttention(c, "", true).form, AttentionForm::kCudnn);  // bottom-right causal
  c.seq_q = 9;
  c.seq_k = 5;
  c.causal = false;
  EXPECT_EQ(ChooseAttention(c, "", true).form, AttentionForm::kCudnn);
}

TEST(AttentionChoiceTest, ABuildWithoutCudnnRunsGemmsAndSaysSoWhenAsked) {
  EXPECT_EQ(ChooseAttention(Gpt(), "", false).form, AttentionForm::kGemm);
  EXPECT_TRUE(ChooseAttention(Gpt(), "", false).error.empty());
  EXPECT_NE(ChooseAttention(Gpt(), "cudnn", false).error.find("fetch-cudnn-frontend"), std::string::npos);
}

TEST(AttentionChoiceTest, AnUnknownFormIsNamed) {
  const AttentionChoice choice = ChooseAttention(Gpt(), "Cudnn", true);
  EXPECT_EQ(choice.error, "PDIST_CUDA_ATTENTION=Cudnn: expected auto, cudnn or gemm");
}

}  // namespace
}  // namespace pdist::exec::cuda
