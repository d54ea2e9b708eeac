// SPMD rules of sum, mean, max, min, their gradients and full: hand-worked cases.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/spmd/spmd_test_util.h"

namespace pdist::nn_spmd_test {
namespace {

using ::testing::HasSubstr;

ir::AttributeMap Axis(std::vector<int64_t> axis, bool keep_dim = false) {
  return {{"axis", std::move(axis)}, {"keep_dim", keep_dim}};
}

const Shape kX = {6, 12, 48};

TEST(ReductionSpmd, PaddleExamples) {
  // Paddle a.6, mesh [2,3]: x[-1,0,1], axis [1,2] → out [-1], Partial{0,1}.
  EXPECT_EQ(Print(Forward("sum", {S(kX, {-1, 0, 1})}, {2, 3}, Axis({1, 2}))), "[-1,0,1] -> [-1] {0: sum, 1: sum}");
  // x[0,1,-1] with keep_dim, axis [1] → out [0,-1,-1], Partial{1}.
  EXPECT_EQ(Print(Forward("sum", {S(kX, {0, 1, -1})}, {2, 3}, Axis({1}, true))), "[0,1,-1] -> [0,-1,-1] {1: sum}");
}

TEST(ReductionSpmd, ReduceTypePerOp) {
  EXPECT_EQ(Print(Forward("mean", {S(kX, {-1, 0, 1})}, {2, 3}, Axis({1, 2}))), "[-1,0,1] -> [-1] {0: avg, 1: avg}");
  EXPECT_EQ(Print(Forward("max", {S(kX, {-1, 0, 1})}, {2, 3}, Axis({-1}))), "[-1,0,1] -> [-1,0] {1: max}");
  // No Partial(min): the reduced axes are gathered first.
  EXPECT_EQ(Print(Forward("min", {S(kX, {-1, 0, 1})}, {2, 3}, Axis({1, 2}))), "[-1,-1,-1] -> [-1]");
  EXPECT_EQ(Print(Forward("min", {S(kX, {1, 0, -1})}, {2, 3}, Axis({2}))), "[1,0,-1] -> [1,0]");
}

TEST(ReductionSpmd, EmptyAxisReducesEverything) {
  absl::StatusOr<ir::SpmdResult> r = Forward("sum", {S(kX, {0, 1, -1})}, {2, 3}, Axis({}));
  EXPECT_EQ(Print(r), "[0,1,-1] -> [] {0: sum, 1: sum}");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->outputs[0].shape, Shape{});
  EXPECT_EQ(Print(Forward("mean", {S(kX, {-1, -1, -1})}, {4}, Axis({}, true))), "[-1,-1,-1] -> [-1,-1,-1]");
}

TEST(ReductionSpmd, UnreducedShardingPassesThrough) {
  EXPECT_EQ(Print(Forward("sum", {S(kX, {0, -1, -1})}, {4}, Axis({2}))), "[0,-1,-1] -> [0,-1]");
}

TEST(ReductionSpmd, PartialInputs) {
  // sum and mean are linear: sum / avg partials pass; max partials do not.
  EXPECT_EQ(Print(Forward("sum", {S({8, 16}, {0, -1}, Sum(1))}, {2, 2}, Axis({1}))), "[0,-1] {1: sum} -> [0] {1: sum}");
  EXPECT_EQ(Print(Forward("sum", {S({8, 16}, {0, -1}, {{1, ReduceType::kAvg}})}, {2, 2}, Axis({1}))),
            "[0,-1] {1: avg} -> [0] {1: avg}");
  EXPECT_EQ(Print(Forward("sum", {S({8, 16}, {0, -1}, {{1, ReduceType::kMax}})}, {2, 2}, Axis({1}))), "[0,-1] -> [0]");
  EXPECT_EQ(Print(Forward("mean", {S({8, 16}, {-1, 1}, Sum(0))}, {2, 2}, Axis({1}))),
            "[-1,1] {0: sum} -> [-1] {0: sum, 1: avg}");
  // max commutes with a Partial(max) only.
  EXPECT_EQ(Print(Forward("max", {S({8, 16}, {0, -1}, {{1, ReduceType::kMax}})}, {2, 2}, Axis({0}))),
            "[0,-1] {1: max} -> [-1] {0: max, 1: max}");
  EXPECT_EQ(Print(Forward("max", {S({8, 16}, {0, -1}, Sum(1))}, {2, 2}, Axis({0}))), "[0,-1] -> [-1] {0: max}");
  EXPECT_EQ(Print(Forward("min", {S({8, 16}, {-1, -1}, {{0, ReduceType::kMax}})}, {2}, Axis({0}))), "[-1,-1] -> [-1]");
}

TEST(ReductionSpmd, Reverse) {
  EXPECT_EQ(Print(Reverse("sum", {S(kX, {-1, -1, -1})}, {S({6}, {0})}, {2, 3}, Axis({1, 2}))), "[0,-1,-1] -> [0]");
  EXPECT_EQ(Print(Reverse("max", {S(kX, {-1, -1, -1})}, {S({6, 1, 48}, {0, -1, 1})}, {2, 3}, Axis({1}, true))),
            "[0,-1,1] -> [0,-1,1]");
  // A Partial output is not propagated back.
  EXPECT_EQ(Print(Reverse("mean", {S(kX, {-1, -1, -1})}, {S({6}, {0}, Sum(1))}, {2, 3}, Axis({1, 2}))),
            "[0,-1,-1] -> [0]");
}

TEST(ReductionSpmd, BadInput) {
  EXPECT_THAT(ErrorOf(Forward("sum", {S(kX, {-1, -1, -1})}, {2}, Axis({3}))), HasSubstr("sum"));
  EXPECT_THAT(ErrorOf(Forward("sum", {S(kX, {-1, -1, -1})}, {2}, Axis({1, -2}))), HasSubstr("named twice"));
  EXPECT_THAT(ErrorOf(Forward("sum", {S(kX, {0, -1})}, {2}, Axis({1}))), HasSubstr("sum: inputs 0"));
}

// --- grads -------------------------------------------------------------------------------------

TEST(ReductionGradSpmd, ReducedAxesAreWholeAndOutGradLeads) {
  EXPECT_EQ(Print(Forward("sum_grad", {S({8, 16, 32}, {0, 1, -1}), S({8, 32}, {0, -1})}, {2, 2}, Axis({1}))),
            "[0,-1,-1], [0,-1] -> [0,-1,-1]");
  EXPECT_EQ(Print(Forward("mean_grad", {S({8, 16, 32}, {0, -1, -1}), S({8, 32}, {1, -1})}, {2, 2}, Axis({1}))),
            "[1,-1,-1], [1,-1] -> [1,-1,-1]");
  EXPECT_EQ(
      Print(Forward("sum_grad", {S({8, 16, 32}, {-1, -1, -1}), S({8, 1, 32}, {0, -1, 1})}, {2, 2}, Axis({1}, true))),
      "[0,-1,1], [0,-1,1] -> [0,-1,1]");
}

TEST(ReductionGradSpmd, PartialOutGradPassesPartialOutIsCleared) {
  EXPECT_EQ(Print(Forward("mean_grad", {S({8, 16}, {-1, -1}), S({8}, {0}, Sum(1))}, {2, 2}, Axis({1}))),
            "[0,-1], [0] {1: sum} -> [0,-1] {1: sum}");
  // max_grad(x, out, out_grad): a Partial out would mark every shard's local maximum.
  EXPECT_EQ(Print(Forward("max_grad", {S({8, 16}, {-1, -1}), S({8}, {-1}, {{1, ReduceType::kMax}}), S({8}, {0})},
                          {2, 2}, Axis({1}))),
            "[0,-1], [0], [0] -> [0,-1]");
  EXPECT_EQ(Print(Forward("min_grad", {S({8, 16}, {-1, 0}), S({8}, {-1}), S({8}, {-1})}, {2}, Axis({1}))),
            "[-1,-1], [-1], [-1] -> [-1,-1]");
}

TEST(ReductionGradSpmd, Reverse) {
  EXPECT_EQ(Print(Reverse("sum_grad", {S({8, 16, 32}, {-1, -1, -1}), S({8, 32}, {-1, -1})},
                          {S({8, 16, 32}, {0, 1, -1})}, {2, 2}, Axis({1}))),
            "[0,-1,-1], [0,-1] -> [0,-1,-1]");
}

TEST(FullSpmd, ReplicatedForwardShardableReverse) {
  absl::StatusOr<ir::SpmdResult> r = Forward("full", {}, {2, 2}, {{"shape", std::vector<int64_t>{8, 16}}});
  EXPECT_EQ(Print(r), " -> [-1,-1]");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->outputs[0].shape, (Shape{8, 16}));
  EXPECT_EQ(Print(Reverse("full", {}, {S({8, 16}, {1, -1}, Sum(0))}, {2, 2}, {{"shape", std::vector<int64_t>{8, 16}}})),
            " -> [1,-1]");
}

}  // namespace
}  // namespace pdist::nn_spmd_test
