// SPMD rules of the elementwise ops (binary, unary, dropout) and their gradients: hand-worked cases.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/spmd/spmd_test_util.h"

namespace pdist::nn_spmd_test {
namespace {

using ::testing::HasSubstr;

const PartialDims kAvg0 = {{0, ReduceType::kAvg}};
const PartialDims kMax0 = {{0, ReduceType::kMax}};

// --- binary ------------------------------------------------------------------------------------

TEST(BinarySpmd, PaddleBroadcastExamples) {
  // Paddle a.5, mesh [4]: x[64,36,12] [-1,-1,0] + y[12] [-1] → y [0].
  EXPECT_EQ(Print(Forward("add", {S({64, 36, 12}, {-1, -1, 0}), S({12}, {-1})}, {4})), "[-1,-1,0], [0] -> [-1,-1,0]");
  // x[64,1,1,12] + y[64,32,12] [0,-1,-1] → out [-1,0,-1,-1]; x keeps its broadcast dims whole.
  EXPECT_EQ(Print(Forward("add", {S({64, 1, 1, 12}, {-1, -1, -1, -1}), S({64, 32, 12}, {0, -1, -1})}, {4})),
            "[-1,-1,-1,-1], [0,-1,-1] -> [-1,0,-1,-1]");
}

TEST(BinarySpmd, PaddleConflictExamples) {
  // x[0,-1] + y[-1,0] → all [0,-1].
  EXPECT_EQ(Print(Forward("add", {S({64, 64}, {0, -1}), S({64, 64}, {-1, 0})}, {4})), "[0,-1], [0,-1] -> [0,-1]");
  // Mesh [2,3]: x[0,-1,-1] + y[-1,1,0] → all [0,1,-1].
  EXPECT_EQ(Print(Forward("multiply", {S({6, 12, 48}, {0, -1, -1}), S({6, 12, 48}, {-1, 1, 0})}, {2, 3})),
            "[0,1,-1], [0,1,-1] -> [0,1,-1]");
}

TEST(BinarySpmd, ComparisonsUseTheSameRule) {
  for (const char* op : {"greater_than", "less_than", "equal"}) {
    EXPECT_EQ(Print(Forward(op, {S({64, 64}, {0, -1}), S({64, 64}, {-1, 0})}, {4})), "[0,-1], [0,-1] -> [0,-1]") << op;
    EXPECT_EQ(Print(Forward(op, {S({64, 64}, {0, -1}, Sum(1)), S({64}, {-1})}, {2, 2})), "[0,-1], [-1] -> [0,-1]")
        << op;
  }
}

TEST(BinarySpmd, SizeOneDimsOnBothSides) {
  // [8,1] + [1,16] → [8,16]: each input's size-1 dim is unsharded.
  EXPECT_EQ(Print(Forward("subtract", {S({8, 1}, {0, 1}), S({1, 16}, {0, 1})}, {2, 2})), "[0,-1], [-1,1] -> [0,1]");
}

TEST(BinarySpmd, Reverse) {
  EXPECT_EQ(Print(Reverse("add", {S({6, 12, 48}, {-1, -1, -1}), S({12, 48}, {-1, -1})}, {S({6, 12, 48}, {0, 1, -1})},
                          {2, 3})),
            "[0,1,-1], [1,-1] -> [0,1,-1]");
  EXPECT_EQ(Print(Reverse("divide", {S({64, 1, 1, 12}, {-1, -1, -1, -1}), S({64, 32, 12}, {-1, -1, -1})},
                          {S({64, 64, 32, 12}, {1, -1, -1, 0})}, {2, 2})),
            "[1,-1,-1,0], [-1,-1,0] -> [1,-1,-1,0]");
}

TEST(BinarySpmd, AdditivePartial) {
  // P + P with one reduce type stays Partial; P + R cannot: both are made whole.
  EXPECT_EQ(Print(Forward("add", {S({8, 16}, {-1, 1}, Sum(0)), S({8, 16}, {-1, 1}, Sum(0))}, {2, 2})),
            "[-1,1] {0: sum}, [-1,1] {0: sum} -> [-1,1] {0: sum}");
  EXPECT_EQ(Print(Forward("subtract", {S({8, 16}, {-1, 1}, Sum(0)), S({8, 16}, {-1, 1})}, {2, 2})),
            "[-1,1], [-1,1] -> [-1,1]");
  EXPECT_EQ(Print(Forward("add", {S({8, 16}, {-1, 1}, Sum(0)), S({8, 16}, {-1, 1}, kAvg0)}, {2, 2})),
            "[-1,1], [-1,1] -> [-1,1]");
  EXPECT_EQ(Print(Forward("add", {S({8, 16}, {-1, -1}, kAvg0), S({16}, {1}, kAvg0)}, {2, 2})),
            "[-1,1] {0: avg}, [1] {0: avg} -> [-1,1] {0: avg}");
  // The Partial mesh dim shards a letter: reduce-scatter first.
  EXPECT_EQ(Print(Forward("add", {S({8, 16}, {-1, -1}, Sum(0)), S({8, 16}, {0, -1}, {})}, {2})),
            "[0,-1], [0,-1] -> [0,-1]");
}

TEST(BinarySpmd, MultiplicativePartial) {
  EXPECT_EQ(Print(Forward("multiply", {S({8, 16}, {-1, 1}, Sum(0)), S({16}, {-1})}, {2, 2})),
            "[-1,1] {0: sum}, [1] -> [-1,1] {0: sum}");
  EXPECT_EQ(Print(Forward("multiply", {S({8, 16}, {-1, 1}), S({16}, {-1}, Sum(0))}, {2, 2})),
            "[-1,1], [1] {0: sum} -> [-1,1] {0: sum}");
  EXPECT_EQ(Print(Forward("multiply", {S({8, 16}, {-1, 1}, Sum(0)), S({16}, {-1}, Sum(0))}, {2, 2})),
            "[-1,1] {0: sum}, [1] -> [-1,1] {0: sum}");
  // divide is linear in x only.
  EXPECT_EQ(Print(Forward("divide", {S({8, 16}, {-1, 1}, Sum(0)), S({16}, {-1})}, {2, 2})),
            "[-1,1] {0: sum}, [1] -> [-1,1] {0: sum}");
  EXPECT_EQ(Print(Forward("divide", {S({8, 16}, {-1, 1}), S({16}, {-1}, Sum(0))}, {2, 2})), "[-1,1], [1] -> [-1,1]");
}

TEST(BinarySpmd, MaximumKeepsPartialMax) {
  EXPECT_EQ(Print(Forward("maximum", {S({8, 16}, {-1, -1}, kMax0), S({8, 16}, {-1, -1}, kMax0)}, {2})),
            "[-1,-1] {0: max}, [-1,-1] {0: max} -> [-1,-1] {0: max}");
  EXPECT_EQ(Print(Forward("maximum", {S({8, 16}, {-1, -1}, Sum(0)), S({8, 16}, {-1, -1}, Sum(0))}, {2})),
            "[-1,-1], [-1,-1] -> [-1,-1]");
}

TEST(BinarySpmd, BadInput) {
  EXPECT_THAT(ErrorOf(Forward("add", {S({8, 16}, {0, -1})}, {2})), HasSubstr("add: expected 2 inputs, got 1"));
  EXPECT_THAT(ErrorOf(Forward("add", {S({8, 16}, {0, 0}), S({16}, {-1})}, {2})), HasSubstr("add: inputs 0"));
}

// --- binary grads ------------------------------------------------------------------------------

TEST(BinaryGradSpmd, BroadcastInputGradIsPartial) {
  // y [16] was broadcast over the rows of out: y_grad sums over them (ReduceGradBroadCastDims).
  EXPECT_EQ(Print(Forward("add_grad", {S({8, 16}, {-1, -1}), S({16}, {-1}), S({8, 16}, {0, 1})}, {2, 2})),
            "[0,1], [1], [0,1] -> [0,1], [1] {0: sum}");
  // x [8,1]: x_grad sums over the columns.
  EXPECT_EQ(Print(Forward("multiply_grad", {S({8, 1}, {-1, -1}), S({8, 16}, {-1, -1}), S({8, 16}, {0, 1})}, {2, 2})),
            "[0,-1], [0,1], [0,1] -> [0,-1] {1: sum}, [0,1]");
}

TEST(BinaryGradSpmd, OutGradWinsConflictsAndItsPartialPasses) {
  EXPECT_EQ(Print(Forward("subtract_grad", {S({8, 16}, {1, -1}), S({8, 16}, {-1, -1}), S({8, 16}, {0, -1})}, {2, 2})),
            "[0,-1], [0,-1], [0,-1] -> [0,-1], [0,-1]");
  EXPECT_EQ(Print(Forward("divide_grad",
                          {S({8, 16}, {-1, -1}, Sum(1)), S({8, 16}, {-1, -1}), S({8, 16}, {0, -1}, Sum(1))}, {2, 2})),
            "[0,-1], [0,-1], [0,-1] {1: sum} -> [0,-1] {1: sum}, [0,-1] {1: sum}");
}

TEST(BinaryGradSpmd, Reverse) {
  EXPECT_EQ(Print(Reverse("maximum_grad", {S({8, 16}, {-1, -1}), S({16}, {-1}), S({8, 16}, {-1, -1})},
                          {S({8, 16}, {0, 1}), S({16}, {1})}, {2, 2})),
            "[0,1], [1], [0,1] -> [0,1], [1]");
}

// --- unary -------------------------------------------------------------------------------------

TEST(UnarySpmd, IdentityOnShardings) {
  for (const char* op : {"relu", "gelu", "silu", "tanh", "exp", "scale", "cast"}) {
    EXPECT_EQ(Print(Forward(op, {S({8, 16, 32}, {0, -1, 1})}, {2, 2})), "[0,-1,1] -> [0,-1,1]") << op;
    EXPECT_EQ(Print(Reverse(op, {S({8, 16, 32}, {-1, -1, -1})}, {S({8, 16, 32}, {1, 0, -1})}, {2, 2})),
              "[1,0,-1] -> [1,0,-1]")
        << op;
  }
}

TEST(UnarySpmd, NonLinearActivationsNeedWholeValues) {
  for (const char* op : {"relu", "gelu", "silu", "tanh", "exp"}) {
    EXPECT_EQ(Print(Forward(op, {S({8, 16}, {0, -1}, Sum(1))}, {2, 2})), "[0,-1] -> [0,-1]") << op;
  }
}

TEST(UnarySpmd, ScalePassesWhatAnAffineMapPreserves) {
  const PartialDims sum = Sum(0);
  EXPECT_EQ(Print(Forward("scale", {S({8, 16}, {-1, 1}, sum)}, {2, 2}, {{"scale", 2.0}})),
            "[-1,1] {0: sum} -> [-1,1] {0: sum}");
  // An offset is added once per rank: a sum would count it twice; a mean would not.
  EXPECT_EQ(Print(Forward("scale", {S({8, 16}, {-1, 1}, sum)}, {2, 2}, {{"bias", 1.0}})), "[-1,1] -> [-1,1]");
  EXPECT_EQ(Print(Forward("scale", {S({8, 16}, {-1, 1}, kAvg0)}, {2, 2}, {{"bias", 1.0}})),
            "[-1,1] {0: avg} -> [-1,1] {0: avg}");
  // A negative factor turns a max into a min.
  EXPECT_EQ(Print(Forward("scale", {S({8, 16}, {-1, 1}, kMax0)}, {2, 2}, {{"scale", -1.0}})), "[-1,1] -> [-1,1]");
  EXPECT_EQ(Print(Forward("scale", {S({8, 16}, {-1, 1}, kMax0)}, {2, 2}, {{"scale", 3.0}})),
            "[-1,1] {0: max} -> [-1,1] {0: max}");
}

TEST(UnarySpmd, CastPassesPartialToFloatingTypesOnly) {
  EXPECT_EQ(Print(Forward("cast", {S({8, 16}, {-1, 1}, Sum(0))}, {2, 2}, {{"dtype", ir::DataType::kFloat16}})),
            "[-1,1] {0: sum} -> [-1,1] {0: sum}");
  EXPECT_EQ(Print(Forward("cast", {S({8, 16}, {-1, 1}, Sum(0))}, {2, 2}, {{"dtype", ir::DataType::kInt64}})),
            "[-1,1] -> [-1,1]");
}

TEST(UnaryGradSpmd, OutGradFirstAndLinearInIt) {
  // relu_grad(out, out_grad): out_grad's mapping wins; its Partial passes, out's is cleared.
  EXPECT_EQ(Print(Forward("relu_grad", {S({8, 16}, {0, -1}), S({8, 16}, {1, -1})}, {2, 2})),
            "[1,-1], [1,-1] -> [1,-1]");
  EXPECT_EQ(Print(Forward("gelu_grad", {S({8, 16}, {-1, 1}, Sum(0)), S({8, 16}, {-1, 1}, Sum(0))}, {2, 2})),
            "[-1,1], [-1,1] {0: sum} -> [-1,1] {0: sum}");
  EXPECT_EQ(Print(Reverse("tanh_grad", {S({8, 16}, {-1, -1}), S({8, 16}, {-1, -1})}, {S({8, 16}, {0, 1})}, {2, 2})),
            "[0,1], [0,1] -> [0,1]");
}

TEST(DropoutSpmd, MaskFollowsOutAndPartialIsCleared) {
  EXPECT_EQ(Print(Forward("dropout", {S({8, 16}, {0, 1}), Absent()}, {2, 2})), "[0,1], _ -> [0,1], [0,1]");
  EXPECT_EQ(Print(Forward("dropout", {S({8, 16}, {0, -1}, Sum(1)), S({1}, {-1})}, {2, 2})),
            "[0,-1], [-1] -> [0,-1], [0,-1]");
  EXPECT_EQ(
      Print(Reverse("dropout", {S({8, 16}, {-1, -1}), Absent()}, {S({8, 16}, {1, -1}), S({8, 16}, {-1, 0})}, {2, 2})),
      "[1,0], _ -> [1,0], [1,0]");
  EXPECT_EQ(Print(Forward("dropout_grad", {S({8, 16}, {-1, -1}), S({8, 16}, {0, -1}, Sum(1))}, {2, 2})),
            "[0,-1], [0,-1] {1: sum} -> [0,-1] {1: sum}");
}

}  // namespace
}  // namespace pdist::nn_spmd_test
