// SPMD rules of sgd, momentum and adamw: param, grad and states share one mapping; the grad is
// whole before the update.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/spmd/spmd_test_util.h"

namespace pdist::nn_spmd_test {
namespace {

using ::testing::HasSubstr;

const Shape kW = {64, 32};
const Shape kScalar = {1};

// adamw(param, grad, learning_rate, moment1, moment2, beta1_pow, beta2_pow)
std::vector<TensorDistSpec> AdamW(DimsMapping param, TensorDistSpec grad, DimsMapping m1, DimsMapping m2) {
  return {S(kW, std::move(param)), std::move(grad),        S(kScalar, {-1}), S(kW, std::move(m1)),
          S(kW, std::move(m2)),    S(kScalar, {-1}), S(kScalar, {-1})};
}

TEST(AdamWSpmd, PartialGradIsReducedBeforeTheUpdate) {
  // Data parallel: the grad is Partial over mesh dim 0; the update needs it whole.
  EXPECT_EQ(Print(Forward("adamw", AdamW({-1, -1}, S(kW, {-1, -1}, Sum(0)), {-1, -1}, {-1, -1}), {2})),
            "[-1,-1], [-1,-1], [-1], [-1,-1], [-1,-1], [-1], [-1] -> [-1,-1], [-1,-1], [-1,-1], [-1], [-1]");
}

TEST(AdamWSpmd, ShardedStatesShardTheUpdate) {
  // ZeRO: moments sharded on mesh dim 0; param and grad follow (reduce-scatter for the grad).
  EXPECT_EQ(Print(Forward("adamw", AdamW({-1, -1}, S(kW, {-1, -1}, Sum(0)), {0, -1}, {0, -1}), {2})),
            "[0,-1], [0,-1], [-1], [0,-1], [0,-1], [-1], [-1] -> [0,-1], [0,-1], [0,-1], [-1], [-1]");
  // Tensor parallel on a 2-D mesh: a column-sharded weight keeps its sharding; the grad is
  // Partial over the data-parallel dim.
  EXPECT_EQ(Print(Forward("adamw", AdamW({-1, 1}, S(kW, {-1, 1}, Sum(0)), {-1, 1}, {-1, 1}), {2, 2})),
            "[-1,1], [-1,1], [-1], [-1,1], [-1,1], [-1], [-1] -> [-1,1], [-1,1], [-1,1], [-1], [-1]");
}

TEST(AdamWSpmd, ConflictKeepsTheParamsSharding) {
  EXPECT_EQ(Print(Forward("adamw", AdamW({0, -1}, S(kW, {-1, 0}), {-1, -1}, {1, -1}), {2, 2})),
            "[0,-1], [0,-1], [-1], [0,-1], [0,-1], [-1], [-1] -> [0,-1], [0,-1], [0,-1], [-1], [-1]");
}

TEST(AdamWSpmd, ScalarsAreReplicated) {
  std::vector<TensorDistSpec> in = AdamW({0, -1}, S(kW, {0, -1}), {0, -1}, {0, -1});
  in[2] = S({}, {});
  in[5] = S(kScalar, {-1}, Sum(0));
  EXPECT_EQ(Print(Forward("adamw", in, {2})),
            "[0,-1], [0,-1], [], [0,-1], [0,-1], [-1], [-1] -> [0,-1], [0,-1], [0,-1], [-1], [-1]");
}

TEST(AdamWSpmd, Reverse) {
  const auto in = AdamW({-1, -1}, S(kW, {-1, -1}), {-1, -1}, {-1, -1});
  const std::vector<TensorDistSpec> out = {S(kW, {0, -1}), S(kW, {0, -1}), S(kW, {-1, -1}), S(kScalar, {-1}),
                                           S(kScalar, {-1})};
  EXPECT_EQ(Print(Reverse("adamw", in, out, {2})),
            "[0,-1], [0,-1], [-1], [0,-1], [0,-1], [-1], [-1] -> [0,-1], [0,-1], [0,-1], [-1], [-1]");
}

TEST(SgdSpmd, ForwardAndReverse) {
  // sgd(param, learning_rate, grad)
  EXPECT_EQ(Print(Forward("sgd", {S(kW, {0, -1}), S(kScalar, {-1}), S(kW, {-1, -1}, Sum(1))}, {2, 2})),
            "[0,-1], [-1], [0,-1] -> [0,-1]");
  EXPECT_EQ(Print(Reverse("sgd", {S(kW, {-1, -1}), S(kScalar, {-1}), S(kW, {-1, -1})}, {S(kW, {1, 0})}, {2, 2})),
            "[1,0], [-1], [1,0] -> [1,0]");
}

TEST(MomentumSpmd, ForwardAndReverse) {
  // momentum(param, grad, velocity, learning_rate)
  EXPECT_EQ(Print(Forward("momentum", {S(kW, {-1, -1}), S(kW, {-1, 0}, Sum(1)), S(kW, {-1, -1}), S(kScalar, {-1})},
                          {2, 2})),
            "[-1,0], [-1,0], [-1,0], [-1] -> [-1,0], [-1,0]");
  EXPECT_EQ(Print(Reverse("momentum", {S(kW, {-1, -1}), S(kW, {-1, -1}), S(kW, {-1, -1}), S(kScalar, {-1})},
                          {S(kW, {-1, -1}), S(kW, {1, -1})}, {2, 2})),
            "[1,-1], [1,-1], [1,-1], [-1] -> [1,-1], [1,-1]");
}

TEST(OptimizerSpmd, Describe) {
  EXPECT_EQ(Describe("adamw", {kW, kW, kScalar, kW, kW, kScalar, kScalar}), "ab,ab,1,ab,ab,1,1->ab,ab,ab,1,1");
  EXPECT_EQ(Describe("adamw", {kW, kW, {}, kW, kW, {}, {}}), "ab,ab,,ab,ab,,->ab,ab,ab,,");
  EXPECT_EQ(Describe("sgd", {kW, kScalar, kW}), "ab,1,ab->ab");
  EXPECT_EQ(Describe("momentum", {{64}, {64}, {64}, kScalar}), "a,a,a,1->a,a");
}

TEST(OptimizerSpmd, Errors) {
  std::string e = ErrorOf(Forward("adamw", AdamW({-1, -1}, S({32, 64}, {-1, -1}), {-1, -1}, {-1, -1}), {2}));
  EXPECT_THAT(e, HasSubstr("adamw"));
  EXPECT_THAT(e, HasSubstr("grad [32,64]"));
  e = ErrorOf(Forward("sgd", {S(kW, {0, 0}), S(kScalar, {-1}), S(kW, {-1, -1})}, {2}));
  EXPECT_THAT(e, HasSubstr("sgd"));
  EXPECT_THAT(e, HasSubstr("[0,0]"));
  e = ErrorOf(Forward("momentum", {S(kW, {-1, -1}), S(kW, {-1, -1})}, {2}));
  EXPECT_THAT(e, HasSubstr("velocity"));
}

}  // namespace
}  // namespace pdist::nn_spmd_test
