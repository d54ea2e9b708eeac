// SPMD rules of embedding, cross_entropy_with_softmax, fused_rope and their gradients.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/spmd/spmd_test_util.h"

namespace pdist::nn_spmd_test {
namespace {

using ::testing::HasSubstr;

// --- embedding -----------------------------------------------------------------------------

const Shape kIds = {8, 16};
const Shape kTable = {100, 32};
const Shape kEmb = {8, 16, 32};

TEST(EmbeddingSpmd, PaddleExamples) {
  // Paddle a.10: x[1,-1], w[0,-1] → out [1,-1,-1] Partial{0} (vocab-parallel).
  EXPECT_EQ(Print(Forward("embedding", {S(kIds, {1, -1}), S(kTable, {0, -1})}, {2, 2})),
            "[1,-1], [0,-1] -> [1,-1,-1] {0: sum}");
  // w[-1,0] → out [1,-1,0].
  EXPECT_EQ(Print(Forward("embedding", {S(kIds, {1, -1}), S(kTable, {-1, 0})}, {2, 2})),
            "[1,-1], [-1,0] -> [1,-1,0]");
}

TEST(EmbeddingSpmd, ReplicatedAndConflicting) {
  EXPECT_EQ(Print(Forward("embedding", {S(kIds, {-1, -1}), S(kTable, {-1, -1})}, {4})),
            "[-1,-1], [-1,-1] -> [-1,-1,-1]");
  // Mesh dim 0 on the batch (seen first) and on the vocab: the batch keeps it.
  EXPECT_EQ(Print(Forward("embedding", {S(kIds, {0, -1}), S(kTable, {0, -1})}, {2})),
            "[0,-1], [-1,-1] -> [0,-1,-1]");
}

TEST(EmbeddingSpmd, PaddingIdxKeepsTheTableWhole) {
  // Paddle throws; pdist gathers the vocab instead (the local kernel would need the padding
  // row's local index).
  EXPECT_EQ(Print(Forward("embedding", {S(kIds, {1, -1}), S(kTable, {0, -1})}, {2, 2}, {{"padding_idx", int64_t{0}}})),
            "[1,-1], [-1,-1] -> [1,-1,-1]");
}

TEST(EmbeddingSpmd, PartialTablePassesPartialIdsAreCleared) {
  // A lookup is linear in the table; ids are integers and must be whole.
  EXPECT_EQ(Print(Forward("embedding", {S(kIds, {1, -1}), S(kTable, {-1, -1}, Sum(0))}, {2, 2})),
            "[1,-1], [-1,-1] {0: sum} -> [1,-1,-1] {0: sum}");
  EXPECT_EQ(Print(Forward("embedding", {S(kIds, {1, -1}, Sum(0)), S(kTable, {-1, -1})}, {2, 2})),
            "[1,-1], [-1,-1] -> [1,-1,-1]");
}

TEST(EmbeddingSpmd, ReverseFromOut) {
  // Paddle: x = out[:-1]; w = [-1, out[-1]].
  EXPECT_EQ(Print(Reverse("embedding", {S(kIds, {-1, -1}), S(kTable, {-1, -1})}, {S(kEmb, {1, -1, 0})}, {2, 2})),
            "[1,-1], [-1,0] -> [1,-1,0]");
}

TEST(EmbeddingSpmd, GradIsPartialOverTheBatch) {
  EXPECT_EQ(Print(Forward("embedding_grad", {S(kIds, {0, -1}), S(kTable, {-1, 1}), S(kEmb, {0, -1, 1})}, {2, 2})),
            "[0,-1], [-1,1], [0,-1,1] -> [-1,1] {0: sum}");
  // Vocab-parallel table: its gradient rows stay sharded; the batch still sums.
  EXPECT_EQ(Print(Forward("embedding_grad", {S(kIds, {0, -1}), S(kTable, {1, -1}), S(kEmb, {-1, -1, -1}, Sum(1))},
                          {2, 2})),
            "[0,-1], [1,-1], [0,-1,-1] -> [1,-1] {0: sum}");
  EXPECT_EQ(Print(Reverse("embedding_grad", {S(kIds, {-1, -1}), S(kTable, {-1, -1}), S(kEmb, {-1, -1, -1})},
                          {S(kTable, {1, 0})}, {2, 2})),
            "[-1,-1], [1,0], [-1,-1,0] -> [1,0]");
}

TEST(EmbeddingSpmd, Describe) {
  EXPECT_EQ(Describe("embedding", {kIds, kTable}), "ab,jk->abk  j→Partial  pass P: weight");
  EXPECT_EQ(Describe("embedding", {kIds, kTable}, {{"padding_idx", int64_t{3}}}),
            "ab,jk->abk  j→Replicate  pass P: weight");
  EXPECT_EQ(Describe("embedding_grad", {kIds, kTable, kEmb}), "ab,jk,abk->jk  ab→Partial  pass P: out_grad");
}

TEST(EmbeddingSpmd, Errors) {
  std::string e = ErrorOf(Forward("embedding", {S(kIds, {1, -1}), S({100}, {0})}, {2, 2}));
  EXPECT_THAT(e, HasSubstr("embedding"));
  EXPECT_THAT(e, HasSubstr("weight"));
  e = ErrorOf(Forward("embedding", {S(kIds, {1}), S(kTable, {0, -1})}, {2, 2}));
  EXPECT_THAT(e, HasSubstr("[1]"));
}

// --- cross_entropy_with_softmax --------------------------------------------------------------

const Shape kLogits = {8, 16, 100};
const Shape kLabel = {8, 16, 1};
constexpr char kCe[] = "cross_entropy_with_softmax";

TEST(CrossEntropySpmd, PaddleExampleMergesLogitsAndLabel) {
  // Paddle a.11: x[1,-1,-1] + label[-1,0,-1] → both [1,0,-1].
  EXPECT_EQ(Print(Forward(kCe, {S(kLogits, {1, -1, -1}), S(kLabel, {-1, 0, -1})}, {2, 2})),
            "[1,0,-1], [1,0,-1] -> [1,0,-1], [1,0,-1]");
}

TEST(CrossEntropySpmd, VocabParallelLossIsWhole) {
  // Hard label, last axis, use_softmax: the vocab stays sharded and the kernel reduces over it.
  EXPECT_EQ(Print(Forward(kCe, {S(kLogits, {0, -1, 1}), S(kLabel, {-1, -1, -1})}, {2, 2})),
            "[0,-1,1], [0,-1,-1] -> [0,-1,1], [0,-1,-1]");
}

TEST(CrossEntropySpmd, SoftmaxAxisReplicatedOtherwise) {
  const Shape soft = kLogits;
  EXPECT_EQ(Print(Forward(kCe, {S(kLogits, {-1, -1, 0}), S(soft, {-1, 1, 0})}, {2, 2}, {{"soft_label", true}})),
            "[-1,1,-1], [-1,1,-1] -> [-1,1,-1], [-1,1,-1]");
  EXPECT_EQ(Print(Forward(kCe, {S(kLogits, {-1, -1, 0}), S(kLabel, {-1, -1, -1})}, {2}, {{"use_softmax", false}})),
            "[-1,-1,-1], [-1,-1,-1] -> [-1,-1,-1], [-1,-1,-1]");
  // Softmax over axis 1 (not the last).
  const Shape logits = {8, 100, 16};
  EXPECT_EQ(Print(Forward(kCe, {S(logits, {-1, 0, 1}), S({8, 1, 16}, {-1, -1, -1})}, {2, 2}, {{"axis", int64_t{1}}})),
            "[-1,-1,1], [-1,-1,1] -> [-1,-1,1], [-1,-1,1]");
}

TEST(CrossEntropySpmd, PartialLogitsAreCleared) {
  EXPECT_EQ(Print(Forward(kCe, {S(kLogits, {0, -1, -1}, Sum(1)), S(kLabel, {-1, -1, -1})}, {2, 2})),
            "[0,-1,-1], [0,-1,-1] -> [0,-1,-1], [0,-1,-1]");
}

TEST(CrossEntropySpmd, Reverse) {
  const std::vector<TensorDistSpec> in = {S(kLogits, {-1, -1, -1}), S(kLabel, {-1, -1, -1})};
  EXPECT_EQ(Print(Reverse(kCe, in, {S(kLogits, {1, -1, 0}), S(kLabel, {1, -1, -1})}, {2, 2})),
            "[1,-1,0], [1,-1,-1] -> [1,-1,0], [1,-1,-1]");
  // The loss's sharding joins softmax's; a soft label keeps the vocab replicated.
  EXPECT_EQ(Print(Reverse(kCe, {S(kLogits, {-1, -1, -1}), S(kLogits, {-1, -1, -1})},
                          {S(kLogits, {-1, -1, 0}), S(kLabel, {-1, 1, -1})}, {2, 2}, {{"soft_label", true}})),
            "[-1,1,-1], [-1,1,-1] -> [-1,1,-1], [-1,1,-1]");
}

TEST(CrossEntropySpmd, Grad) {
  constexpr char kGrad[] = "cross_entropy_with_softmax_grad";
  EXPECT_EQ(Print(Forward(kGrad, {S(kLabel, {0, -1, -1}), S(kLogits, {-1, -1, 1}), S(kLabel, {-1, -1, -1})}, {2, 2})),
            "[0,-1,-1], [0,-1,1], [0,-1,-1] -> [0,-1,1]");
  // logits_grad = (softmax - onehot(label)) · loss_grad is linear in loss_grad.
  EXPECT_EQ(Print(Forward(kGrad, {S(kLabel, {0, -1, -1}), S(kLogits, {0, -1, -1}), S(kLabel, {0, -1, -1}, Sum(1))},
                          {2, 2})),
            "[0,-1,-1], [0,-1,-1], [0,-1,-1] {1: sum} -> [0,-1,-1] {1: sum}");
  EXPECT_EQ(Print(Reverse(kGrad, {S(kLabel, {-1, -1, -1}), S(kLogits, {-1, -1, -1}), S(kLabel, {-1, -1, -1})},
                          {S(kLogits, {-1, 0, 1})}, {2, 2})),
            "[-1,0,-1], [-1,0,1], [-1,0,-1] -> [-1,0,1]");
}

TEST(CrossEntropySpmd, Describe) {
  EXPECT_EQ(Describe(kCe, {kLogits, kLabel}), "abk,ab1->abk,ab1  loss: k→reduced in kernel");
  EXPECT_EQ(Describe(kCe, {kLogits, kLogits}, {{"soft_label", true}}), "abk,abk->abk,ab1  k→Replicate");
  EXPECT_EQ(Describe(kCe, {{8, 100, 16}, {8, 1, 16}}, {{"axis", int64_t{1}}}), "akb,a1b->akb,a1b  k→Replicate");
  EXPECT_EQ(Describe("cross_entropy_with_softmax_grad", {kLabel, kLogits, kLabel}),
            "ab1,abk,ab1->abk  pass P: loss_grad");
}

TEST(CrossEntropySpmd, Errors) {
  const std::string e = ErrorOf(Forward(kCe, {S(kLogits, {-1, -1, -1}), S({8, 16}, {-1, -1})}, {2}));
  EXPECT_THAT(e, HasSubstr(kCe));
  EXPECT_THAT(e, HasSubstr("label"));
}

// --- fused_rope ----------------------------------------------------------------------------

const Shape kQ = {2, 16, 8, 64};
const Shape kKv = {2, 16, 2, 64};  // grouped-query: 2 key/value heads
const Shape kSin = {16, 64};

TEST(FusedRopeSpmd, BatchAndHeadsShard) {
  EXPECT_EQ(Print(Forward("fused_rope", {S(kQ, {0, -1, 1, -1}), S(kQ, {-1, -1, -1, -1}), Absent(), S(kSin, {-1, -1}),
                                         S(kSin, {-1, -1}), Absent()},
                          {2, 2})),
            "[0,-1,1,-1], [0,-1,1,-1], _, [-1,-1], [-1,-1], _ -> [0,-1,1,-1], [0,-1,1,-1], [-1]");
}

TEST(FusedRopeSpmd, SeqAndHeadDimReplicated) {
  EXPECT_EQ(Print(Forward("fused_rope", {S(kQ, {-1, 0, -1, 1})}, {2, 2})),
            "[-1,-1,-1,-1] -> [-1,-1,-1,-1], [-1], [-1]");
  // sin/cos sharded along the positions are gathered.
  EXPECT_EQ(Print(Forward("fused_rope",
                          {S(kQ, {0, -1, -1, -1}), Absent(), Absent(), S(kSin, {1, -1}), S(kSin, {-1, 1})}, {2, 2})),
            "[0,-1,-1,-1], _, _, [-1,-1], [-1,-1] -> [0,-1,-1,-1], [-1], [-1]");
}

TEST(FusedRopeSpmd, TimeMajorGroupedHeadsAndPositions) {
  const Shape q_tm = {16, 2, 8, 64};
  EXPECT_EQ(Print(Forward("fused_rope", {S(q_tm, {-1, 0, -1, -1})}, {2}, {{"time_major", true}})),
            "[-1,0,-1,-1] -> [-1,0,-1,-1], [-1], [-1]");
  // q and k heads differ in number; rope rotates each head on its own, so both shard when the
  // mesh dim divides the 2 k/v heads, and neither on 4 ranks.
  EXPECT_EQ(Print(Forward("fused_rope", {S(kQ, {-1, -1, 0, -1}), S(kKv, {-1, -1, -1, -1}), S(kKv, {-1, -1, -1, -1})},
                          {2})),
            "[-1,-1,0,-1], [-1,-1,0,-1], [-1,-1,0,-1] -> [-1,-1,0,-1], [-1,-1,0,-1], [-1,-1,0,-1]");
  EXPECT_EQ(Print(Forward("fused_rope", {S(kQ, {-1, -1, 0, -1}), S(kKv, {-1, -1, -1, -1})}, {4})),
            "[-1,-1,-1,-1], [-1,-1,-1,-1] -> [-1,-1,-1,-1], [-1,-1,-1,-1], [-1]");
  // position_ids [b, s] bring the batch sharding.
  EXPECT_EQ(Print(Forward("fused_rope", {S(kQ, {-1, -1, -1, -1}), Absent(), Absent(), S({32, 64}, {-1, -1}),
                                         S({32, 64}, {-1, -1}), S({2, 16}, {0, -1})},
                          {2})),
            "[0,-1,-1,-1], _, _, [-1,-1], [-1,-1], [0,-1] -> [0,-1,-1,-1], [-1], [-1]");
}

TEST(FusedRopeSpmd, PartialAndReverse) {
  // The rotation is linear: a Partial q passes to out_q; q and k must be Partial alike.
  EXPECT_EQ(Print(Forward("fused_rope", {S(kQ, {0, -1, -1, -1}, Sum(1))}, {2, 2})),
            "[0,-1,-1,-1] {1: sum} -> [0,-1,-1,-1] {1: sum}, [-1], [-1]");
  EXPECT_EQ(Print(Forward("fused_rope", {S(kQ, {0, -1, -1, -1}, Sum(1)), S(kQ, {-1, -1, -1, -1})}, {2, 2})),
            "[0,-1,-1,-1], [0,-1,-1,-1] -> [0,-1,-1,-1], [0,-1,-1,-1], [-1]");
  const auto r = Reverse("fused_rope", {S(kQ, {-1, -1, -1, -1}), S(kKv, {-1, -1, -1, -1})},
                         {S(kQ, {0, -1, 1, -1}), S(kKv, {-1, -1, -1, -1}), S({0}, {-1})}, {2, 2});
  EXPECT_EQ(Print(r), "[0,-1,1,-1], [0,-1,1,-1] -> [0,-1,1,-1], [0,-1,1,-1], [-1]");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->outputs[1].shape, kKv);
  EXPECT_EQ(r->outputs[2].shape, (Shape{0}));
}

TEST(FusedRopeSpmd, Grad) {
  const std::vector<TensorDistSpec> in = {S(kSin, {-1, -1}), S(kSin, {-1, -1}), Absent(), S(kQ, {0, -1, 1, -1}),
                                          S(kKv, {-1, -1, -1, -1}), Absent()};
  const auto r = Forward("fused_rope_grad", in, {2, 2});
  EXPECT_EQ(Print(r), "[-1,-1], [-1,-1], _, [0,-1,1,-1], [0,-1,1,-1], _ -> [0,-1,1,-1], [0,-1,1,-1], [-1]");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->outputs[0].shape, kQ);
  EXPECT_EQ(r->outputs[1].shape, kKv);
}

TEST(FusedRopeSpmd, Describe) {
  EXPECT_EQ(Describe("fused_rope", {kQ, kKv, {0}, kSin, kSin, {0}}),
            "bshd,bshd,_,sd,sd,_->bshd,bshd,_  sd→Replicate  pass P: q&k  h→Replicate unless its mesh dim divides 2");
  EXPECT_EQ(Describe("fused_rope", {{16, 2, 8, 64}, {0}, {0}, {1, 16, 1, 64}, {1, 16, 1, 64}, {2, 16}},
                     {{"time_major", true}}),
            "sbhd,_,_,1s1d,1s1d,bs->sbhd,_,_  sd→Replicate  pass P: q");
  EXPECT_EQ(Describe("fused_rope_grad", {{0}, {0}, {0}, kQ, {0}, {0}}),
            "_,_,_,bshd,_,_->bshd,_,_  sd→Replicate  pass P: out_q_grad");
}

TEST(FusedRopeSpmd, Errors) {
  std::string e = ErrorOf(Forward("fused_rope", {S({2, 16, 64}, {0, -1, -1})}, {2}));
  EXPECT_THAT(e, HasSubstr("fused_rope"));
  EXPECT_THAT(e, HasSubstr("rank 4"));
  e = ErrorOf(Forward("fused_rope", {S(kQ, {0, -1, -1, -1}), Absent(), Absent(), S({16, 64, 1}, {-1, -1, -1})}, {2}));
  EXPECT_THAT(e, HasSubstr("sin"));
}

TEST(NnSpmdRules, EveryOpHasAllThreeSlots) {
  for (const char* op : {"softmax", "softmax_grad", "log_softmax", "log_softmax_grad", "layer_norm", "layer_norm_grad",
                         "rms_norm", "rms_norm_grad", "embedding", "embedding_grad", "cross_entropy_with_softmax",
                         "cross_entropy_with_softmax_grad", "fused_rope", "fused_rope_grad", "flash_attn",
                         "flash_attention", "flash_attn_grad", "sgd", "momentum", "adamw"}) {
    const ir::OpDef& def = Def(op);
    EXPECT_TRUE(def.infer_spmd && def.infer_spmd_reverse && def.describe_spmd) << op;
  }
}

}  // namespace
}  // namespace pdist::nn_spmd_test
