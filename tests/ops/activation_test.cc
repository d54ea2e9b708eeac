// Tests of the unary family: scale, activations, cast and dropout — forward values, errors,
// dropout's determinism, and finite-difference gradient checks.
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "executor/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/builder.h"
#include "ir/op_def.h"
#include "tests/ops/op_test_helpers.h"
#include "tests/testing/op_testing.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace pdist::testing {
namespace {

using exec::Tensor;
using ir::DataType;
using ir::Shape;
using ::testing::DoubleNear;
using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pointwise;

// f32 forward values of `op` on {-1, 0, 1, 2}.
std::vector<double> OnSamples(const std::string& op, const ir::AttributeMap& attrs = {}) {
  return Values(MustRun(op, {F32({4}, {-1, 0, 1, 2})}, attrs)[0]);
}

TEST(ActivationTest, Scale) {
  const Tensor x = F32({3}, {1, 2, -3});
  EXPECT_THAT(Values(MustRun("scale", {x}, {{"scale", 2.0}, {"bias", 1.0}})[0]), ElementsAre(3, 5, -5));
  EXPECT_THAT(Values(MustRun("scale", {x}, {{"scale", 2.0}, {"bias", 1.0}, {"bias_after_scale", false}})[0]),
              ElementsAre(4, 6, -4));
}

TEST(ActivationTest, ForwardValues) {
  const auto near = [](std::vector<double> expected) { return Pointwise(DoubleNear(1e-6), expected); };
  EXPECT_THAT(OnSamples("relu"), ElementsAre(0, 0, 1, 2));
  EXPECT_THAT(OnSamples("gelu"), near({-0.15865525393145707, 0, 0.8413447460685429, 1.9544997361036416}));
  EXPECT_THAT(OnSamples("gelu", {{"approximate", true}}),
              near({-0.15880800939172324, 0, 0.8411919906082768, 1.954597694087775}));
  EXPECT_THAT(OnSamples("silu"), near({-0.2689414213699951, 0, 0.7310585786300049, 1.7615941559557646}));
  EXPECT_THAT(OnSamples("tanh"), near({std::tanh(-1.0), 0, std::tanh(1.0), std::tanh(2.0)}));
  EXPECT_THAT(OnSamples("exp"), near({std::exp(-1.0), 1, std::exp(1.0), std::exp(2.0)}));
  EXPECT_THAT(OnSamples("sigmoid"), near({0.2689414213699951, 0.5, 0.7310585786300049, 0.8807970779778823}));
  EXPECT_THAT(OnSamples("erf"), near({std::erf(-1.0), 0, std::erf(1.0), std::erf(2.0)}));
}

// sqrt and rsqrt are defined for x >= 0 (x > 0): samples of their own.
TEST(ActivationTest, SqrtAndRsqrtValues) {
  const Tensor x = F64({3}, {0.25, 1, 4});
  EXPECT_THAT(Values(MustRun("sqrt", {x})[0]), ElementsAre(0.5, 1, 2));
  EXPECT_THAT(Values(MustRun("rsqrt", {x})[0]), ElementsAre(2, 1, 0.5));
  const Tensor g = F64({3}, {1, 2, 3});
  EXPECT_THAT(Values(MustRun("sqrt_grad", {F64({3}, {0.5, 1, 2}), g})[0]), ElementsAre(1, 1, 0.75));
  EXPECT_THAT(Values(MustRun("rsqrt_grad", {F64({3}, {2, 1, 0.5}), g})[0]), ElementsAre(-4, -1, -0.1875));
}

// Large f32 inputs (split across threads, Eigen's vectorised exp/tanh/erf) against double math.
TEST(ActivationTest, VectorisedFloatMatchesDoubleReference) {
  const Tensor x = testing::RandomTensor({{100003}, DataType::kFloat32}, 5, -6.0, 6.0);
  const std::vector<std::pair<std::string, std::function<double(double)>>> cases = {
      {"gelu", [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }},
      {"silu", [](double v) { return v / (1 + std::exp(-v)); }},
      {"tanh", [](double v) { return std::tanh(v); }},
      {"exp", [](double v) { return std::exp(v); }},
      {"sigmoid", [](double v) { return 1 / (1 + std::exp(-v)); }},
      {"erf", [](double v) { return std::erf(v); }},
  };
  for (const auto& [op, reference] : cases) {
    const Tensor out = MustRun(op, {x})[0];
    for (int64_t i = 0; i < x.num_elements(); ++i) {
      const double want = reference(x.At(i));
      ASSERT_NEAR(out.At(i), want, 1e-6 + 1e-5 * std::abs(want)) << op << " at x = " << x.At(i);
    }
  }
}

TEST(ActivationTest, GradOpValues) {
  const Tensor g = F64({3}, {1, 2, 3});
  EXPECT_THAT(Values(MustRun("relu_grad", {F64({3}, {0, 1, 2}), g})[0]), ElementsAre(0, 2, 3));
  EXPECT_THAT(Values(MustRun("tanh_grad", {F64({3}, {0, 0.5, 1}), g})[0]), ElementsAre(1, 1.5, 0));
  EXPECT_THAT(Values(MustRun("exp_grad", {F64({3}, {1, 2, 3}), g})[0]), ElementsAre(1, 4, 9));
  EXPECT_THAT(Values(MustRun("gelu_grad", {F64({1}, {0}), F64({1}, {1})})[0]), ElementsAre(0.5));
  EXPECT_THAT(Values(MustRun("silu_grad", {F64({1}, {0}), F64({1}, {1})})[0]), ElementsAre(0.5));
}

TEST(ActivationTest, Cast) {
  std::vector<Tensor> to_int = MustRun("cast", {F32({3}, {1.7, -1.7, 0})}, {{"dtype", DataType::kInt32}});
  EXPECT_EQ(to_int[0].type(), (ir::TensorType{{3}, DataType::kInt32}));
  EXPECT_THAT(Values(to_int[0]), ElementsAre(1, -1, 0));  // truncates toward zero
  EXPECT_THAT(Values(MustRun("cast", {F64({3}, {0.5, -2, 0})}, {{"dtype", DataType::kBool}})[0]), ElementsAre(1, 1, 0));
  const Tensor ids = exec::TensorFromDoubles({{2}, DataType::kInt64}, {7, -3});
  std::vector<Tensor> to_float = MustRun("cast", {ids}, {{"dtype", DataType::kFloat32}});
  EXPECT_EQ(to_float[0].dtype(), DataType::kFloat32);
  EXPECT_THAT(Values(to_float[0]), ElementsAre(7, -3));
}

// cast's gradient is a cast back to the input dtype, and none flows through integer casts.
TEST(ActivationTest, CastGradient) {
  const ir::OpDef* def = ir::OpRegistry::Global().Find("cast");
  ASSERT_NE(def, nullptr);
  for (DataType from : {DataType::kFloat32, DataType::kInt64}) {
    ir::Program program;
    ir::Builder b(&program);
    ir::Value* x = b.Data("x", {{2, 3}, from});
    absl::StatusOr<ir::Value*> y = b.Op1("cast", {x}, {{"dtype", DataType::kFloat64}});
    ASSERT_TRUE(y.ok()) << y.status();
    ir::Value* g = b.Data("g", (*y)->type());
    absl::StatusOr<std::vector<ir::Value*>> grads = def->grad(b, *(*y)->producer(), {g});
    ASSERT_TRUE(grads.ok()) << grads.status();
    ASSERT_EQ(grads->size(), 1u);
    if (from == DataType::kInt64) {
      EXPECT_EQ((*grads)[0], nullptr);
    } else {
      ASSERT_NE((*grads)[0], nullptr);
      EXPECT_EQ((*grads)[0]->type(), x->type());
      EXPECT_EQ((*grads)[0]->producer()->type(), "cast");
    }
  }
}

TEST(ActivationTest, Errors) {
  ir::Program program;
  ir::Builder b(&program);
  ir::Value* ints = b.Data("ids", {{4}, DataType::kInt64});
  ir::Value* x = b.Data("x", {{4}, DataType::kFloat32});
  EXPECT_THAT(b.Op1("relu", {ints}).status().message(), HasSubstr("x must be floating point, got i64[4]"));
  EXPECT_THAT(b.Create("dropout", {x}, {{"p", 1.5}}).status().message(), HasSubstr("p must be in [0, 1]"));
  EXPECT_THAT(b.Create("dropout", {x}, {{"mode", std::string("sometimes")}}).status().message(), HasSubstr("mode"));
  EXPECT_THAT(b.Create("dropout", {x, x}).status().message(), HasSubstr("seed_tensor must be"));
  EXPECT_THAT(b.Op1("tanh_grad", {x, ints}).status().message(), HasSubstr("differ"));
}

std::vector<Tensor> Dropout(const Tensor& x, ir::AttributeMap attrs, const Tensor& seed = Tensor()) {
  return seed.defined() ? MustRun("dropout", {x, seed}, attrs) : MustRun("dropout", {x}, attrs);
}

TEST(DropoutTest, UpscaleInTrain) {
  const Tensor x = F32({100000}, std::vector<double>(100000, 1.0));
  std::vector<Tensor> out = Dropout(x, {{"p", 0.25}, {"seed", int64_t{3}}});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].type(), (ir::TensorType{{100000}, DataType::kBool}));
  int64_t kept = 0;
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    const bool keep = out[1].At(i) != 0;
    kept += keep;
    ASSERT_FLOAT_EQ(out[0].At(i), keep ? 1.0 / 0.75 : 0.0) << i;
  }
  EXPECT_NEAR(static_cast<double>(kept) / 100000, 0.75, 0.01);
}

// The mask depends on (seed, index) only: same seed, same bits on any thread count; the
// seed_tensor input overrides the attribute.
TEST(DropoutTest, DeterministicPerSeed) {
  const Tensor x = testing::RandomTensor({{300, 257}, DataType::kFloat32}, 9);
  std::vector<std::vector<double>> masks;
  for (int threads : {1, 2, 3}) {
#ifdef _OPENMP
    omp_set_num_threads(threads);
#endif
    masks.push_back(Values(Dropout(x, {{"seed", int64_t{42}}})[1]));
  }
#ifdef _OPENMP
  omp_set_num_threads(2);
#endif
  EXPECT_EQ(masks[0], masks[1]);
  EXPECT_EQ(masks[0], masks[2]);
  EXPECT_NE(masks[0], Values(Dropout(x, {{"seed", int64_t{43}}})[1]));
  const Tensor seed = exec::TensorFromDoubles({{}, DataType::kInt64}, {42});
  EXPECT_EQ(masks[0], Values(Dropout(x, {{"seed", int64_t{7}}}, seed)[1]));
}

TEST(DropoutTest, TestModeAndOtherModes) {
  const Tensor x = F64({4}, {1, 2, 3, 4});
  std::vector<Tensor> eval = Dropout(x, {{"p", 0.5}, {"is_test", true}});
  EXPECT_THAT(Values(eval[0]), ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(Values(eval[1]), Each(1.0));
  const ir::AttributeMap downgrade = {{"p", 0.5}, {"mode", std::string("downgrade_in_infer")}};
  ir::AttributeMap downgrade_eval = downgrade;
  downgrade_eval["is_test"] = true;
  EXPECT_THAT(Values(Dropout(x, downgrade_eval)[0]), ElementsAre(0.5, 1, 1.5, 2));
  std::vector<Tensor> train = Dropout(x, downgrade);  // kept elements are not rescaled
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(train[0].At(i), train[1].At(i) != 0 ? x.At(i) : 0.0);
  EXPECT_THAT(Values(Dropout(x, {{"p", 0.0}})[0]), ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(Values(Dropout(x, {{"p", 1.0}})[0]), Each(0.0));
}

TEST(DropoutTest, GradAppliesMaskAndFactor) {
  const Tensor mask = exec::TensorFromDoubles({{3}, DataType::kBool}, {1, 0, 1});
  const Tensor g = F64({3}, {1, 2, 3});
  EXPECT_THAT(Values(MustRun("dropout_grad", {mask, g}, {{"p", 0.5}})[0]), ElementsAre(2, 0, 6));
  EXPECT_THAT(Values(MustRun("dropout_grad", {mask, g}, {{"p", 0.5}, {"is_test", true}})[0]), ElementsAre(1, 0, 3));
}

// Finite-difference checks of every differentiable unary op (float64).
struct UnaryGradCase {
  std::string op;
  ir::AttributeMap attrs;
};

// sqrt and rsqrt on their domain, away from 0 where the finite differences would not converge.
TEST(ActivationTest, SqrtAndRsqrtGradsMatchFiniteDifferences) {
  const Tensor x = testing::RandomTensor({{2, 3}, DataType::kFloat64}, 37, 0.5, 3.0);
  for (const char* op : {"sqrt", "rsqrt"}) {
    const absl::Status s = testing::CheckOpGradients(op, {{x}}, {});
    EXPECT_TRUE(s.ok()) << op << ": " << s;
  }
}

class UnaryGradTest : public ::testing::TestWithParam<UnaryGradCase> {};

TEST_P(UnaryGradTest, MatchesFiniteDifferences) {
  const Tensor x = testing::RandomTensor({{2, 3}, DataType::kFloat64}, 31, -2.0, 2.0);
  const absl::Status s = testing::CheckOpGradients(GetParam().op, {{x}}, GetParam().attrs);
  EXPECT_TRUE(s.ok()) << s;
}

INSTANTIATE_TEST_SUITE_P(
    Ops, UnaryGradTest,
    ::testing::Values(UnaryGradCase{"scale", {{"scale", 3.0}, {"bias", 1.0}}},
                      UnaryGradCase{"scale", {{"scale", -0.5}, {"bias", 2.0}, {"bias_after_scale", false}}},
                      UnaryGradCase{"relu", {}}, UnaryGradCase{"gelu", {}},
                      UnaryGradCase{"gelu", {{"approximate", true}}}, UnaryGradCase{"silu", {}},
                      UnaryGradCase{"tanh", {}}, UnaryGradCase{"exp", {}}, UnaryGradCase{"sigmoid", {}},
                      UnaryGradCase{"erf", {}},
                      UnaryGradCase{"cast", {{"dtype", DataType::kFloat64}}},
                      UnaryGradCase{"dropout", {{"p", 0.3}, {"seed", int64_t{5}}}},
                      UnaryGradCase{"dropout", {{"p", 0.3}, {"mode", std::string("downgrade_in_infer")}}},
                      UnaryGradCase{"dropout", {{"p", 0.3}, {"is_test", true}}}),
    [](const ::testing::TestParamInfo<UnaryGradCase>& info) {
      return info.param.op + "_" + std::to_string(info.index);
    });

}  // namespace
}  // namespace pdist::testing
