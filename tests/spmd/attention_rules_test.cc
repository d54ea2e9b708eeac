// SPMD rules of flash_attn / flash_attention and flash_attn_grad: hand-worked cases.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/spmd/spmd_test_util.h"

namespace pdist::nn_spmd_test {
namespace {

using ::testing::HasSubstr;

const Shape kQ = {2, 128, 8, 64};
const Shape kGqa = {2, 128, 2, 64};  // 2 key/value heads for 8 query heads
const Shape kMqa = {2, 128, 1, 64};
const Shape kMask = {2, 8, 128, 128};
const Shape kLse = {2, 8, 128};
const DimsMapping kRep = {-1, -1, -1, -1};

TEST(FlashAttnSpmd, PaddleExample) {
  // Paddle a.12: q[0,-1,1,-1], k[0,-1,-1,-1] → q/k/v [0,-1,1,-1], lse [0,1,-1].
  const auto r = Forward("flash_attn", {S(kQ, {0, -1, 1, -1}), S(kQ, {0, -1, -1, -1}), S(kQ, kRep)}, {2, 2});
  EXPECT_EQ(Print(r), "[0,-1,1,-1], [0,-1,1,-1], [0,-1,1,-1] -> [0,-1,1,-1], [-1], [0,1,-1], [-1]");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->outputs[1].shape, (Shape{0}));  // no softmax unless return_softmax
  EXPECT_EQ(r->outputs[2].shape, kLse);
  EXPECT_EQ(r->outputs[3].shape, (Shape{2}));
}

TEST(FlashAttnSpmd, SequencesAndHeadDimsReplicated) {
  EXPECT_EQ(Print(Forward("flash_attn", {S(kQ, {-1, 0, -1, 1}), S(kQ, {-1, 1, -1, -1}), S(kQ, {-1, -1, -1, 0})},
                          {2, 2})),
            "[-1,-1,-1,-1], [-1,-1,-1,-1], [-1,-1,-1,-1] -> [-1,-1,-1,-1], [-1], [-1,-1,-1], [-1]");
}

TEST(FlashAttnSpmd, ConflictKeepsTheFirstSeen) {
  // q shards heads on mesh dim 0, k shards the batch on it: q is seen first.
  EXPECT_EQ(Print(Forward("flash_attn", {S(kQ, {-1, -1, 0, -1}), S(kQ, {0, -1, -1, -1}), S(kQ, kRep)}, {2})),
            "[-1,-1,0,-1], [-1,-1,0,-1], [-1,-1,0,-1] -> [-1,-1,0,-1], [-1], [-1,0,-1], [-1]");
}

TEST(FlashAttnSpmd, GroupedQueryHeadsNeedADivisibleMesh) {
  // 2 key/value heads on 2 ranks: each rank's 4 query heads meet their own kv head.
  EXPECT_EQ(Print(Forward("flash_attn", {S(kQ, {-1, -1, 0, -1}), S(kGqa, kRep), S(kGqa, kRep)}, {2})),
            "[-1,-1,0,-1], [-1,-1,0,-1], [-1,-1,0,-1] -> [-1,-1,0,-1], [-1], [-1,0,-1], [-1]");
  // On 4 ranks the 2 kv heads cannot be split evenly: heads replicated.
  EXPECT_EQ(Print(Forward("flash_attn", {S(kQ, {-1, -1, 0, -1}), S(kGqa, kRep), S(kGqa, kRep)}, {4})),
            "[-1,-1,-1,-1], [-1,-1,-1,-1], [-1,-1,-1,-1] -> [-1,-1,-1,-1], [-1], [-1,-1,-1], [-1]");
  // The batch still shards when the heads cannot.
  EXPECT_EQ(Print(Forward("flash_attn", {S(kQ, {0, -1, 1, -1}), S(kGqa, kRep), S(kGqa, kRep)}, {2, 4})),
            "[0,-1,-1,-1], [0,-1,-1,-1], [0,-1,-1,-1] -> [0,-1,-1,-1], [-1], [0,-1,-1], [-1]");
  // One shared kv head (multi-query): query heads shard, k and v stay whole.
  EXPECT_EQ(Print(Forward("flash_attn", {S(kQ, {-1, -1, 0, -1}), S(kMqa, kRep), S(kMqa, kRep)}, {4})),
            "[-1,-1,0,-1], [-1,-1,-1,-1], [-1,-1,-1,-1] -> [-1,-1,0,-1], [-1], [-1,0,-1], [-1]");
}

TEST(FlashAttnSpmd, MaskSoftmaxAndSeed) {
  const std::vector<TensorDistSpec> in = {S(kQ, {0, -1, -1, -1}), S(kQ, kRep), S(kQ, kRep), S({2}, {0}),
                                          S(kMask, {-1, 1, 0, -1})};
  EXPECT_EQ(Print(Forward("flash_attn", in, {2, 2}, {{"return_softmax", true}})),
            "[0,-1,1,-1], [0,-1,1,-1], [0,-1,1,-1], [-1], [0,1,-1,-1] -> "
            "[0,-1,1,-1], [0,1,-1,-1], [0,1,-1], [-1]");
  // A broadcast mask [1, 1, sq, sk] is never sharded.
  const std::vector<TensorDistSpec> bcast = {S(kQ, {0, -1, 1, -1}), S(kQ, kRep), S(kQ, kRep), Absent(),
                                             S({1, 1, 128, 128}, kRep)};
  EXPECT_EQ(Print(Forward("flash_attn", bcast, {2, 2})),
            "[0,-1,1,-1], [0,-1,1,-1], [0,-1,1,-1], _, [-1,-1,-1,-1] -> [0,-1,1,-1], [-1], [0,1,-1], [-1]");
}

TEST(FlashAttnSpmd, PartialInputsAreCleared) {
  EXPECT_EQ(Print(Forward("flash_attn", {S(kQ, {0, -1, -1, -1}, Sum(1)), S(kQ, kRep), S(kQ, kRep, Sum(1))}, {2, 2})),
            "[0,-1,-1,-1], [0,-1,-1,-1], [0,-1,-1,-1] -> [0,-1,-1,-1], [-1], [0,-1,-1], [-1]");
}

TEST(FlashAttnSpmd, AliasFlashAttention) {
  EXPECT_EQ(Print(Forward("flash_attention", {S(kQ, {0, -1, 1, -1}), S(kQ, kRep), S(kQ, kRep)}, {2, 2})),
            "[0,-1,1,-1], [0,-1,1,-1], [0,-1,1,-1] -> [0,-1,1,-1], [-1], [0,1,-1], [-1]");
  EXPECT_THAT(ErrorOf(Forward("flash_attention", {S(kQ, kRep), S({2, 128, 64}, {-1, -1, -1}), S(kQ, kRep)}, {2})),
              HasSubstr("flash_attention"));
}

TEST(FlashAttnSpmd, Reverse) {
  const std::vector<TensorDistSpec> in = {S(kQ, kRep), S(kQ, kRep), S(kQ, kRep)};
  EXPECT_EQ(Print(Reverse("flash_attn", in,
                          {S(kQ, {0, -1, 1, -1}), S({0}, {-1}), S(kLse, {-1, -1, -1}), S({2}, {-1})}, {2, 2})),
            "[0,-1,1,-1], [0,-1,1,-1], [0,-1,1,-1] -> [0,-1,1,-1], [-1], [0,1,-1], [-1]");
  // out and softmax_lse disagree: out (seen first) wins.
  EXPECT_EQ(Print(Reverse("flash_attn", in,
                          {S(kQ, {0, -1, 1, -1}), S({0}, {-1}), S(kLse, {1, 0, -1}), S({2}, {-1})}, {2, 2})),
            "[0,-1,1,-1], [0,-1,1,-1], [0,-1,1,-1] -> [0,-1,1,-1], [-1], [0,1,-1], [-1]");
}

TEST(FlashAttnSpmd, Grad) {
  const std::vector<TensorDistSpec> in = {S(kQ, {0, -1, -1, -1}), S(kGqa, kRep),         S(kGqa, kRep),
                                          S(kQ, kRep),             S(kLse, {-1, 1, -1}), S({2}, {-1}),
                                          Absent(),                S(kQ, {-1, -1, -1, -1}, Sum(1))};
  const auto r = Forward("flash_attn_grad", in, {2, 2});
  EXPECT_EQ(Print(r),
            "[0,-1,1,-1], [0,-1,1,-1], [0,-1,1,-1], [0,-1,1,-1], [0,1,-1], [-1], _, [0,-1,1,-1] -> "
            "[0,-1,1,-1], [0,-1,1,-1], [0,-1,1,-1]");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->outputs[1].shape, kGqa);
  // dq, dk, dv are linear in out_grad: its Partial passes when no axis uses that mesh dim.
  const std::vector<TensorDistSpec> partial = {S(kQ, {0, -1, -1, -1}), S(kQ, kRep), S(kQ, kRep), S(kQ, kRep),
                                               S(kLse, {-1, -1, -1}), S({2}, {-1}), Absent(), S(kQ, kRep, Sum(1))};
  EXPECT_EQ(Print(Forward("flash_attn_grad", partial, {2, 2})),
            "[0,-1,-1,-1], [0,-1,-1,-1], [0,-1,-1,-1], [0,-1,-1,-1], [0,-1,-1], [-1], _, [0,-1,-1,-1] {1: sum} -> "
            "[0,-1,-1,-1] {1: sum}, [0,-1,-1,-1] {1: sum}, [0,-1,-1,-1] {1: sum}");
  const std::vector<TensorDistSpec> rep = {S(kQ, kRep), S(kQ, kRep), S(kQ, kRep), S(kQ, kRep),
                                           S(kLse, {-1, -1, -1}), Absent(), Absent(), S(kQ, kRep)};
  EXPECT_EQ(Print(Reverse("flash_attn_grad", rep, {S(kQ, {1, -1, -1, -1}), S(kQ, kRep), S(kQ, {-1, -1, 0, -1})},
                          {2, 2})),
            "[1,-1,0,-1], [1,-1,0,-1], [1,-1,0,-1], [1,-1,0,-1], [1,0,-1], _, _, [1,-1,0,-1] -> "
            "[1,-1,0,-1], [1,-1,0,-1], [1,-1,0,-1]");
}

TEST(FlashAttnSpmd, Describe) {
  EXPECT_EQ(Describe("flash_attn", {kQ, kQ, kQ}), "bshd,bthd,bthe->bshe,_,bhs,z  stdez→Replicate");
  EXPECT_EQ(Describe("flash_attention", {kQ, kGqa, kGqa, {2}, {1, 1, 128, 128}}, {{"return_softmax", true}}),
            "bshd,bthd,bthe,z,11st->bshe,bhst,bhs,z  stdez→Replicate  h→Replicate unless its mesh dim divides 2");
  EXPECT_EQ(Describe("flash_attn_grad", {kQ, kQ, kQ, kQ, kLse, {2}, {0}, kQ}),
            "bshd,bthd,bthe,bshe,bhs,z,_,bshe->bshd,bthd,bthe  stdez→Replicate  pass P: out_grad");
}

TEST(FlashAttnSpmd, Errors) {
  std::string e = ErrorOf(Forward("flash_attn", {S(kQ, kRep), S(kQ, kRep)}, {2}));
  EXPECT_THAT(e, HasSubstr("flash_attn"));
  EXPECT_THAT(e, HasSubstr("v (input 2)"));
  e = ErrorOf(Forward("flash_attn", {S(kQ, {0, -1, 0, -1}), S(kQ, kRep), S(kQ, kRep)}, {2}));
  EXPECT_THAT(e, HasSubstr("[0,-1,0,-1]"));
}

}  // namespace
}  // namespace pdist::nn_spmd_test
