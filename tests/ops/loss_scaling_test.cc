// count_nonfinite, update_loss_scaling (Paddle's rule, branch by branch) and the optimizers'
// skip_update operand.
#include <cmath>
#include <limits>

#include "ir/op_def.h"
#include "tests/ops/nn_test_util.h"

namespace pdist::nn_test {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(CountNonfiniteTest, CountsInfinitiesAndNans) {
  const std::vector<Tensor> out =
      RunOk("count_nonfinite", {F32({2, 3}, {1, kInf, -kInf, std::nan(""), 0, 65504})});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].type(), (ir::TensorType{{}, DataType::kFloat32}));
  ExpectValues(out[0], {3}, 0);
  // In float16 (through the f32 math of executor/cpu/float_math.h): 70000 is past f16's range.
  const Tensor f16 = exec::CastTensor(F32({3}, {1, 70000, -2}), DataType::kFloat16);
  ExpectValues(RunOk("count_nonfinite", {f16})[0], {1}, 0);
}

TEST(CountNonfiniteTest, CountsOverEveryAxisOnly) {
  const ir::TensorType x{{4}, DataType::kFloat32};
  ExpectBuildError("count_nonfinite", {&x}, {{"axis", std::vector<int64_t>{0}}}, "counts over every axis");
}

// (found_inf, scale, good, bad, skipped) → (found_inf, scale', good', bad', skipped').
std::vector<double> Update(double found, double scale, double good, double bad, double skipped,
                           const ir::AttributeMap& attrs = {}) {
  const std::vector<Tensor> out = RunOk("update_loss_scaling", {F32({}, {found}), F32({1}, {scale}), F32({1}, {good}),
                                                                 F32({1}, {bad}), F32({1}, {skipped})},
                                        attrs);
  std::vector<double> values;
  for (const Tensor& t : out) values.push_back(t.At(0));
  return values;
}

TEST(UpdateLossScalingTest, FollowsPaddlesRule) {
  // An overflow: good resets, bad counts, the scale waits for decr_every_n_nan_or_inf (2).
  EXPECT_EQ(Update(3, 1024, 7, 0, 5), (std::vector<double>{3, 1024, 0, 1, 6}));
  // The second one in a row halves the scale and resets bad.
  EXPECT_EQ(Update(1, 1024, 0, 1, 6), (std::vector<double>{1, 512, 0, 0, 7}));
  // Never below 1.
  EXPECT_EQ(Update(1, 1.5, 0, 1, 0), (std::vector<double>{1, 1, 0, 0, 1}));
  // A clean step: bad resets, good counts; the incr_every_n_steps-th doubles the scale.
  EXPECT_EQ(Update(0, 1024, 3, 1, 2, {{"incr_every_n_steps", int64_t{5}}}), (std::vector<double>{0, 1024, 4, 0, 2}));
  EXPECT_EQ(Update(0, 1024, 4, 0, 2, {{"incr_every_n_steps", int64_t{5}}}), (std::vector<double>{0, 2048, 0, 0, 2}));
  // A growth past f32's range keeps the scale.
  EXPECT_EQ(Update(0, 3e38, 0, 0, 0, {{"incr_every_n_steps", int64_t{1}}})[1], static_cast<double>(3e38f));
  // Ratios are attributes.
  EXPECT_EQ(Update(1, 1000, 0, 0, 0, {{"decr_every_n_nan_or_inf", int64_t{1}}, {"decr_ratio", 0.25}})[1], 250);
}

TEST(UpdateLossScalingTest, RefusesRatiosThatCannotWork) {
  const ir::TensorType s{{1}, DataType::kFloat32};
  ExpectBuildError("update_loss_scaling", {&s, &s, &s, &s, &s}, {{"decr_ratio", 1.0}}, "decr_ratio in (0, 1) (got 1)");
  ExpectBuildError("update_loss_scaling", {&s, &s, &s, &s, &s}, {{"incr_every_n_steps", int64_t{0}}},
                   "incr_every_n_steps (0)");
  const ir::TensorType wide{{2}, DataType::kFloat32};
  ExpectBuildError("update_loss_scaling", {&s, &wide, &s, &s, &s}, {}, "loss_scaling must be a float of shape [] or [1]");
}

TEST(SkipUpdateTest, EveryOptimizerKeepsItsOperandsWhenTheCountIsPositive) {
  const Tensor p = F32({2}, {1, 2}), g = F32({2}, {kInf, 1}), lr = F32({}, {0.1}), v = F32({2}, {0.5, 0.5});
  const Tensor skip = F32({}, {1}), run = F32({}, {0});
  EXPECT_EQ(exec::TensorToDoubles(RunOk("sgd", {p, lr, g, skip})[0]), exec::TensorToDoubles(p));
  const std::vector<Tensor> m = RunOk("momentum", {p, g, v, lr, skip});
  EXPECT_EQ(exec::TensorToDoubles(m[0]), exec::TensorToDoubles(p));
  EXPECT_EQ(exec::TensorToDoubles(m[1]), exec::TensorToDoubles(v));
  const Tensor b1 = F32({1}, {0.9}), b2 = F32({1}, {0.999});
  const std::vector<Tensor> a = RunOk("adamw", {p, g, lr, v, v, b1, b2, skip});
  ASSERT_EQ(a.size(), 5u);
  for (const auto& [got, want] : std::vector<std::pair<Tensor, Tensor>>{{a[0], p}, {a[1], v}, {a[2], v}, {a[3], b1}, {a[4], b2}}) {
    EXPECT_EQ(exec::TensorToDoubles(got), exec::TensorToDoubles(want));
  }
  // A zero count updates as without the operand.
  const Tensor finite = F32({2}, {1, 1});
  EXPECT_EQ(exec::TensorToDoubles(RunOk("sgd", {p, lr, finite, run})[0]),
            exec::TensorToDoubles(RunOk("sgd", {p, lr, finite})[0]));
}

TEST(SkipUpdateTest, AMasterWeightReadsALowPrecisionGradient) {
  const Tensor p = F32({2}, {1, 2}), lr = F32({}, {0.5});
  const Tensor g = exec::CastTensor(F32({2}, {2, -2}), DataType::kBFloat16);
  const std::vector<Tensor> out = RunOk("sgd", {p, lr, g});
  EXPECT_EQ(out[0].dtype(), DataType::kFloat32);
  ExpectValues(out[0], {0, 3}, 0);
  // Not for an f64 parameter, and not of another shape.
  const ir::TensorType p64{{2}, DataType::kFloat64}, s{{}, DataType::kFloat64}, g16{{2}, DataType::kBFloat16};
  ExpectBuildError("sgd", {&p64, &s, &g16}, {}, "operands 0 and 2 differ: f64[2] vs bf16[2]");
  const ir::TensorType p32{{2}, DataType::kFloat32}, g16x3{{3}, DataType::kBFloat16};
  ExpectBuildError("sgd", {&p32, &s, &g16x3}, {}, "operands 0 and 2 differ: f32[2] vs bf16[3]");
}

}  // namespace
}  // namespace pdist::nn_test
