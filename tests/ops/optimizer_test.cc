// sgd, momentum, adamw: one update step against hand-computed numbers, and signature errors.
#include "ir/op_def.h"
#include "tests/ops/nn_test_util.h"

namespace pdist::nn_test {
namespace {

TEST(SgdTest, OneStep) {
  const std::vector<Tensor> out = RunOk("sgd", {F64({3}, {1, 2, 3}), F64({}, {0.5}), F64({3}, {2, -2, 0.5})});
  ASSERT_EQ(out.size(), 1u);
  ExpectValues(out[0], {0, 3, 2.75}, 1e-15);
}

TEST(SgdTest, Float32ParamWithF64LearningRate) {
  const std::vector<Tensor> out = RunOk("sgd", {F32({2}, {1, 2}), F64({1}, {0.25}), F32({2}, {4, 4})});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].dtype(), DataType::kFloat32);
  ExpectValues(out[0], {0, 1}, 0);
}

// p = (1, 2), g = (0.5, -1), velocity = (0.1, 0.2), lr = 0.1, mu = 0.9.
std::vector<Tensor> MomentumStep(const ir::AttributeMap& attrs) {
  return RunOk("momentum", {F64({2}, {1, 2}), F64({2}, {0.5, -1}), F64({2}, {0.1, 0.2}), F64({}, {0.1})}, attrs);
}

TEST(MomentumTest, OneStep) {
  const std::vector<Tensor> out = MomentumStep({});
  ASSERT_EQ(out.size(), 2u);
  ExpectValues(out[1], {0.59, -0.82}, 1e-15, "velocity");  // 0.9 v + g
  ExpectValues(out[0], {0.941, 2.082}, 1e-15, "param");    // p - lr v_out
}

TEST(MomentumTest, Nesterov) {
  const std::vector<Tensor> out = MomentumStep({{"use_nesterov", true}});
  ASSERT_EQ(out.size(), 2u);
  ExpectValues(out[0], {0.8969, 2.1738}, 1e-15);  // p - lr (g + mu v_out)
}

TEST(MomentumTest, L2Regularisation) {
  const std::vector<Tensor> out = MomentumStep({{"regularization_coeff", 0.1}});
  ASSERT_EQ(out.size(), 2u);
  ExpectValues(out[1], {0.69, -0.62}, 1e-15);  // g + 0.1 p = (0.6, -0.8)
  ExpectValues(out[0], {0.931, 2.062}, 1e-15);
}

// First AdamW step from zero moments: p = (1, -2), g = (0.5, 0.1), lr = 0.1, beta pows = betas.
std::vector<Tensor> AdamWStep(const ir::AttributeMap& attrs) {
  return RunOk("adamw",
               {F64({2}, {1, -2}), F64({2}, {0.5, 0.1}), F64({}, {0.1}), F64({2}, {0, 0}), F64({2}, {0, 0}),
                F64({1}, {0.9}), F64({1}, {0.999})},
               attrs);
}

TEST(AdamWTest, OneStep) {
  const std::vector<Tensor> out = AdamWStep({});
  ASSERT_EQ(out.size(), 5u);
  ExpectValues(out[1], {0.05, 0.01}, 1e-15, "moment1");        // (1 - beta1) g
  ExpectValues(out[2], {0.00025, 0.00001}, 1e-18, "moment2");  // (1 - beta2) g²
  ExpectValues(out[3], {0.81}, 1e-15, "beta1_pow");
  ExpectValues(out[4], {0.998001}, 1e-15, "beta2_pow");
  // Decay: p * (1 - 0.1 * 0.01) = (0.999, -1.998). The bias-corrected first step is
  // lr * m̂ / (sqrt(v̂) + eps) = 0.1 * sign(g) * (1 - 1e-8 / |g|).
  ExpectValues(out[0], {0.8990000019999999, -2.0979999900000013}, 1e-13, "param");
}

TEST(AdamWTest, WithoutDecayAndWithLrRatio) {
  const std::vector<Tensor> out = AdamWStep({{"with_decay", false}, {"lr_ratio", 0.5}});
  ASSERT_EQ(out.size(), 5u);
  ExpectValues(out[0], {1 - 0.05 * (1 - 2e-8), -2 - 0.05 * (1 - 1e-7)}, 1e-13);
}

TEST(OptimizerTest, SignatureErrors) {
  const ir::TensorType p{{4, 3}, DataType::kFloat32};
  const ir::TensorType g_bad{{3, 4}, DataType::kFloat32};
  const ir::TensorType lr{{}, DataType::kFloat32};
  const ir::TensorType lr_bad{{2}, DataType::kFloat32};
  const ir::TensorType pow{{1}, DataType::kFloat32};
  ExpectBuildError("sgd", {&p, &lr, &g_bad}, {}, "differ");
  ExpectBuildError("sgd", {&p, &lr_bad, &p}, {}, "learning_rate must be a float tensor of shape [] or [1]");
  ExpectBuildError("momentum", {&p, &p, &g_bad, &lr}, {}, "differ");
  ExpectBuildError("adamw", {&p, &p, &lr, &p, &p, &pow, &lr_bad}, {}, "beta2_pow must be");
}

TEST(OptimizerTest, OpsAreNotDifferentiable) {
  for (const char* name : {"sgd", "momentum", "adamw"}) {
    const ir::OpDef* def = ir::OpRegistry::Global().Find(name);
    ASSERT_NE(def, nullptr) << name;
    EXPECT_EQ(def->grad_kind, ir::GradKind::kNotDifferentiable) << name;
  }
}

}  // namespace
}  // namespace pdist::nn_test
