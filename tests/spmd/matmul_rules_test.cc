// SPMD rules of matmul and matmul_grad through the op registry: hand-worked cases.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/spmd/spmd_test_util.h"

namespace pdist::nn_spmd_test {
namespace {

using ::testing::HasSubstr;

const ir::AttributeMap kTransY = {{"trans_y", true}};
const ir::AttributeMap kTransX = {{"trans_x", true}};
const PartialDims kSum1 = {{1, ReduceType::kSum}};

TEST(MatmulSpmd, PaddleExamples) {
  // Paddle a.4: mk[1,0]·kn[-1,-1] → y [0,-1], out [1,-1] Partial{0}.
  EXPECT_EQ(Print(Forward("matmul", {S({64, 32}, {1, 0}), S({32, 48}, {-1, -1})}, {2, 2})),
            "[1,0], [0,-1] -> [1,-1] {0: sum}");
  // mk[-1,-1]·kn[1,0] → x [-1,1], out [-1,0] Partial{1}.
  EXPECT_EQ(Print(Forward("matmul", {S({64, 32}, {-1, -1}), S({32, 48}, {1, 0})}, {2, 2})),
            "[-1,1], [1,0] -> [-1,0] {1: sum}");
  // Reverse: out mn[1,0] → x [1,-1], y [-1,0].
  EXPECT_EQ(Print(Reverse("matmul", {S({64, 32}, {-1, -1}), S({32, 48}, {-1, -1})}, {S({64, 48}, {1, 0})}, {2, 2})),
            "[1,-1], [-1,0] -> [1,0]");
}

TEST(MatmulSpmd, ReplicatedAndOneDimMesh) {
  EXPECT_EQ(Print(Forward("matmul", {S({64, 32}, {-1, -1}), S({32, 48}, {-1, -1})}, {4})),
            "[-1,-1], [-1,-1] -> [-1,-1]");
  EXPECT_EQ(Print(Forward("matmul", {S({64, 32}, {0, -1}), S({32, 48}, {-1, -1})}, {4})), "[0,-1], [-1,-1] -> [0,-1]");
  EXPECT_EQ(Print(Forward("matmul", {S({64, 32}, {-1, -1}), S({32, 48}, {-1, 0})}, {4})), "[-1,-1], [-1,0] -> [-1,0]");
}

TEST(MatmulSpmd, Conflicts) {
  // m and n on one mesh dim: m (seen first) keeps it.
  EXPECT_EQ(Print(Forward("matmul", {S({64, 32}, {0, -1}), S({32, 48}, {-1, 0})}, {2})), "[0,-1], [-1,-1] -> [0,-1]");
  // k on two mesh dims: x's (seen first) wins.
  EXPECT_EQ(Print(Forward("matmul", {S({64, 32}, {-1, 0}), S({32, 48}, {1, -1})}, {2, 2})),
            "[-1,0], [0,-1] -> [-1,-1] {0: sum}");
}

TEST(MatmulSpmd, TransposedOperands) {
  // y stored [n,k]: its dim 0 is n.
  EXPECT_EQ(Print(Forward("matmul", {S({64, 32}, {0, -1}), S({48, 32}, {1, -1})}, {2, 2}, kTransY)),
            "[0,-1], [1,-1] -> [0,1]");
  EXPECT_EQ(Print(Forward("matmul", {S({64, 32}, {-1, 0}), S({48, 32}, {-1, -1})}, {2}, kTransY)),
            "[-1,0], [-1,0] -> [-1,-1] {0: sum}");
  // x stored [k,m].
  EXPECT_EQ(Print(Forward("matmul", {S({32, 64}, {1, 0}), S({32, 48}, {-1, -1})}, {2, 2}, kTransX)),
            "[1,0], [1,-1] -> [0,-1] {1: sum}");
  EXPECT_EQ(
      Print(Reverse("matmul", {S({64, 32}, {-1, -1}), S({48, 32}, {-1, -1})}, {S({64, 48}, {0, 1})}, {2, 2}, kTransY)),
      "[0,-1], [1,-1] -> [0,1]");
}

TEST(MatmulSpmd, BroadcastBatchDims) {
  EXPECT_EQ(Print(Forward("matmul", {S({8, 64, 32}, {0, -1, -1}), S({32, 48}, {-1, 1})}, {2, 2})),
            "[0,-1,-1], [-1,1] -> [0,-1,1]");
  // A size-1 batch dim of x is never sharded; y's batch dim shards out.
  EXPECT_EQ(Print(Forward("matmul", {S({1, 64, 32}, {1, -1, -1}), S({4, 32, 48}, {0, -1, -1})}, {2, 2})),
            "[-1,-1,-1], [0,-1,-1] -> [0,-1,-1]");
  EXPECT_EQ(Print(Forward("matmul", {S({2, 4, 64, 32}, {0, -1, -1, -1}), S({4, 32, 48}, {1, -1, -1})}, {2, 2})),
            "[0,1,-1,-1], [1,-1,-1] -> [0,1,-1,-1]");
  EXPECT_EQ(Print(Reverse("matmul", {S({8, 64, 32}, {-1, -1, -1}), S({32, 48}, {-1, -1})}, {S({8, 64, 48}, {0, -1, 1})},
                          {2, 2})),
            "[0,-1,-1], [-1,1] -> [0,-1,1]");
}

TEST(MatmulSpmd, OneDimOperands) {
  EXPECT_EQ(Print(Forward("matmul", {S({32}, {0}), S({32, 48}, {-1, 1})}, {2, 2})), "[0], [0,1] -> [1] {0: sum}");
  EXPECT_EQ(Print(Forward("matmul", {S({64, 32}, {1, -1}), S({32}, {0})}, {2, 2})), "[1,0], [0] -> [1] {0: sum}");
  absl::StatusOr<ir::SpmdResult> dot = Forward("matmul", {S({32}, {0}), S({32}, {-1})}, {2});
  EXPECT_EQ(Print(dot), "[0], [0] -> [] {0: sum}");
  ASSERT_TRUE(dot.ok());
  EXPECT_EQ(dot->outputs[0].shape, Shape{});
}

TEST(MatmulSpmd, PartialInputs) {
  // P·R → P: the Partial operand passes (matmul is linear in x).
  EXPECT_EQ(Print(Forward("matmul", {S({64, 32}, {-1, -1}, Sum(0)), S({32, 48}, {-1, 1})}, {2, 2})),
            "[-1,-1] {0: sum}, [-1,1] -> [-1,1] {0: sum}");
  EXPECT_EQ(Print(Forward("matmul", {S({64, 32}, {-1, -1}), S({32, 48}, {-1, -1}, kSum1)}, {2, 2})),
            "[-1,-1], [-1,-1] {1: sum} -> [-1,-1] {1: sum}");
  // P·P on one mesh dim is not a product of sums: y is reduced first.
  EXPECT_EQ(Print(Forward("matmul", {S({64, 32}, {-1, -1}, Sum(0)), S({32, 48}, {-1, -1}, Sum(0))}, {2})),
            "[-1,-1] {0: sum}, [-1,-1] -> [-1,-1] {0: sum}");
  // The Partial mesh dim shards n: x must be reduce-scattered.
  EXPECT_EQ(Print(Forward("matmul", {S({64, 32}, {-1, -1}, Sum(0)), S({32, 48}, {-1, 0})}, {2})),
            "[-1,-1], [-1,0] -> [-1,0]");
  // A Partial(max) does not commute with a product.
  EXPECT_EQ(Print(Forward("matmul", {S({64, 32}, {-1, -1}, {{0, ReduceType::kMax}}), S({32, 48}, {-1, -1})}, {2})),
            "[-1,-1], [-1,-1] -> [-1,-1]");
  // Contraction on one mesh dim, pass-through on the other.
  EXPECT_EQ(Print(Forward("matmul", {S({64, 32}, {-1, 0}, kSum1), S({32, 48}, {-1, -1})}, {2, 2})),
            "[-1,0] {1: sum}, [0,-1] -> [-1,-1] {0: sum, 1: sum}");
  // Reverse never infers Partial.
  EXPECT_EQ(
      Print(Reverse("matmul", {S({64, 32}, {-1, -1}), S({32, 48}, {-1, -1})}, {S({64, 48}, {1, -1}, Sum(0))}, {2, 2})),
      "[1,-1], [-1,-1] -> [1,-1]");
}

TEST(MatmulSpmd, BadInput) {
  EXPECT_THAT(ErrorOf(Forward("matmul", {S({64, 32}, {0}), S({32, 48}, {-1, -1})}, {2})),
              HasSubstr("dims_mapping [0] has 1 entries"));
  EXPECT_THAT(ErrorOf(Forward("matmul", {S({64, 32}, {0, 0}), S({32, 48}, {-1, -1})}, {2})),
              HasSubstr("matmul: inputs 0"));
  EXPECT_THAT(ErrorOf(Forward("matmul", {S({64, 32}, {0, 3}), S({32, 48}, {-1, -1})}, {2, 2})),
              HasSubstr("out of range"));
  EXPECT_THAT(ErrorOf(Forward("matmul", {S({64, 32}, {0, -1})}, {2})), HasSubstr("matmul: expected 2 inputs, got 1"));
  EXPECT_THAT(ErrorOf(Forward("matmul", {S({}, {}), S({32, 48}, {-1, -1})}, {2})), HasSubstr("rank >= 1"));
  EXPECT_THAT(ErrorOf(Reverse("matmul", {S({64, 32}, {-1, -1}), S({32, 48}, {-1, -1})}, {S({64, 48}, {0})}, {2})),
              HasSubstr("matmul: outputs 0"));
}

// --- matmul_grad -----------------------------------------------------------------------------

TEST(MatmulGradSpmd, ContractedLettersMakeGradsPartial) {
  // x_grad = G·Yᵀ sums over n; y_grad = Xᵀ·G sums over m.
  EXPECT_EQ(Print(Forward("matmul_grad", {S({64, 32}, {0, -1}), S({32, 48}, {-1, 1}), S({64, 48}, {0, 1})}, {2, 2})),
            "[0,-1], [-1,1], [0,1] -> [0,-1] {1: sum}, [-1,1] {0: sum}");
}

TEST(MatmulGradSpmd, MegatronColumnAndRowParallel) {
  // mesh [dp, mp]: column-parallel W [h, 4h] sharded on n by mp, batch on dp.
  EXPECT_EQ(Print(Forward("matmul_grad",
                          {S({8, 64, 32}, {0, -1, -1}), S({32, 48}, {-1, 1}), S({8, 64, 48}, {0, -1, 1})}, {2, 2})),
            "[0,-1,-1], [-1,1], [0,-1,1] -> [0,-1,-1] {1: sum}, [-1,1] {0: sum}");
  // row-parallel W [4h, h] sharded on k by mp: x_grad stays sharded, W_grad Partial over dp.
  EXPECT_EQ(Print(Forward("matmul_grad",
                          {S({8, 64, 48}, {0, -1, 1}), S({48, 32}, {1, -1}), S({8, 64, 32}, {0, -1, -1})}, {2, 2})),
            "[0,-1,1], [1,-1], [0,-1,-1] -> [0,-1,1], [1,-1] {0: sum}");
}

TEST(MatmulGradSpmd, TransposedAndConflicting) {
  EXPECT_EQ(Print(Forward("matmul_grad", {S({64, 32}, {0, -1}), S({48, 32}, {1, -1}), S({64, 48}, {-1, -1})}, {2, 2},
                          kTransY)),
            "[0,-1], [1,-1], [0,1] -> [0,-1] {1: sum}, [1,-1] {0: sum}");
  // out_grad disagrees with x on m: x (merged first) wins and out_grad is resharded.
  EXPECT_EQ(Print(Forward("matmul_grad", {S({64, 32}, {0, -1}), S({32, 48}, {-1, -1}), S({64, 48}, {1, -1})}, {2, 2})),
            "[0,-1], [-1,-1], [0,-1] -> [0,-1], [-1,-1] {0: sum}");
}

TEST(MatmulGradSpmd, PartialOutGradPasses) {
  EXPECT_EQ(Print(Forward("matmul_grad",
                          {S({64, 32}, {0, -1}), S({32, 48}, {-1, -1}, kSum1), S({64, 48}, {-1, -1}, kSum1)}, {2, 2})),
            "[0,-1], [-1,-1], [0,-1] {1: sum} -> [0,-1] {1: sum}, [-1,-1] {0: sum, 1: sum}");
}

TEST(MatmulGradSpmd, BroadcastBatchBecomesPartialOnTheWeightGrad) {
  // Paddle's ReduceGradBroadCastDims: y has no batch dim, so y_grad sums over it.
  EXPECT_EQ(Print(Forward("matmul_grad",
                          {S({4, 64, 32}, {0, -1, -1}), S({32, 48}, {-1, -1}), S({4, 64, 48}, {-1, -1, -1})}, {2})),
            "[0,-1,-1], [-1,-1], [0,-1,-1] -> [0,-1,-1], [-1,-1] {0: sum}");
  // A size-1 batch dim of x: x_grad sums over it.
  EXPECT_EQ(
      Print(Forward("matmul_grad",
                    {S({1, 64, 32}, {-1, -1, -1}), S({4, 32, 48}, {0, -1, -1}), S({4, 64, 48}, {-1, -1, -1})}, {2})),
      "[-1,-1,-1], [0,-1,-1], [0,-1,-1] -> [-1,-1,-1] {0: sum}, [0,-1,-1]");
}

TEST(MatmulGradSpmd, Reverse) {
  EXPECT_EQ(Print(Reverse("matmul_grad", {S({64, 32}, {-1, -1}), S({32, 48}, {-1, -1}), S({64, 48}, {-1, -1})},
                          {S({64, 32}, {0, -1}), S({32, 48}, {-1, 1})}, {2, 2})),
            "[0,-1], [-1,1], [0,1] -> [0,-1], [-1,1]");
}

}  // namespace
}  // namespace pdist::nn_spmd_test
