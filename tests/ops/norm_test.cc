// softmax, log_softmax, layer_norm, rms_norm: hand-computed values, shape errors, gradients.
#include <cmath>

#include "tests/ops/nn_test_util.h"

namespace pdist::nn_test {
namespace {

using pdist::testing::GradInput;

TEST(SoftmaxTest, SmallVector) {
  const std::vector<Tensor> out = RunOk("softmax", {F32({1, 3}, {1, 2, 3})});
  ASSERT_EQ(out.size(), 1u);
  ExpectValues(out[0], {0.09003057317038046, 0.24472847105479764, 0.6652409557748218}, 1e-6);
}

TEST(SoftmaxTest, LogSoftmaxSmallVector) {
  const std::vector<Tensor> out = RunOk("log_softmax", {F64({3}, {1, 2, 3})});
  ASSERT_EQ(out.size(), 1u);
  ExpectValues(out[0], {-2.40760596444438, -1.4076059644443804, -0.40760596444438046}, 1e-12);
}

TEST(SoftmaxTest, AlongLeadingAxisAndLargeLogits) {
  // Columns [1, 3] and [1001, 1003] give the same probabilities: the max is subtracted first.
  const std::vector<Tensor> out = RunOk("softmax", {F64({2, 2}, {1, 1001, 3, 1003})}, {{"axis", int64_t{0}}});
  ASSERT_EQ(out.size(), 1u);
  const double p = 1 / (1 + std::exp(2.0));
  ExpectValues(out[0], {p, p, 1 - p, 1 - p}, 1e-12);
}

TEST(SoftmaxTest, ShapeErrors) {
  const ir::TensorType x{{2, 3}, DataType::kFloat32};
  ExpectBuildError("softmax", {&x}, {{"axis", int64_t{2}}}, "axis 2 out of range");
  const ir::TensorType ids{{2, 3}, DataType::kInt64};
  ExpectBuildError("log_softmax", {&ids}, {}, "floating point");
}

TEST(SoftmaxTest, Gradients) {
  ExpectGradientsOk("softmax", {{Random64({2, 5}, 1)}}, {});
  ExpectGradientsOk("softmax", {{Random64({2, 3, 4}, 2)}}, {{"axis", int64_t{1}}});
  ExpectGradientsOk("log_softmax", {{Random64({3, 4}, 3)}}, {});
  ExpectGradientsOk("log_softmax", {{Random64({2, 3, 2}, 4)}}, {{"axis", int64_t{0}}});
}

TEST(LayerNormTest, OneRowWithScaleAndBias) {
  const std::vector<Tensor> out =
      RunOk("layer_norm", {F64({1, 4}, {1, 2, 3, 4}), F64({4}, {1, 2, 1, 1}), F64({4}, {0, 0, 1, 0})});
  ASSERT_EQ(out.size(), 3u);
  // mean 2.5, variance 1.25, rstd = 1 / sqrt(1.25 + 1e-5).
  ExpectValues(out[0], {-1.3416354199689269, -0.894423613312618, 1.447211806656309, 1.3416354199689269}, 1e-12);
  ExpectValues(out[1], {2.5}, 1e-12);
  ExpectValues(out[2], {1.25}, 1e-12);
}

// The statistics are shaped like x's leading dims (not flattened), so each keeps its sharding.
TEST(LayerNormTest, StatisticsAreShapedLikeTheLeadingDims) {
  ir::Program program;
  ir::Builder b(&program);
  ir::Value* x = b.Data("x", {{2, 3, 4}, DataType::kFloat32});
  auto results = b.Create("layer_norm", {x, nullptr, nullptr}, {{"begin_norm_axis", int64_t{2}}});
  ASSERT_TRUE(results.ok()) << results.status();
  EXPECT_EQ((*results)[0]->type().shape, (Shape{2, 3, 4}));
  EXPECT_EQ((*results)[1]->type().shape, (Shape{2, 3}));
  EXPECT_EQ((*results)[2]->type().shape, (Shape{2, 3}));
}

TEST(LayerNormTest, WithoutScaleAndBiasNormalisesTrailingDims) {
  // begin_norm_axis = 1 on [2, 2, 2]: each sample's 4 values are normalised together.
  const std::vector<Tensor> out =
      RunOk("layer_norm", {F64({2, 2, 2}, {1, 2, 3, 4, 10, 12, 10, 12}), Tensor(), Tensor()}, {{"epsilon", 0.0}});
  ASSERT_EQ(out.size(), 3u);
  const double r = 1 / std::sqrt(1.25);
  ExpectValues(out[0], {-1.5 * r, -0.5 * r, 0.5 * r, 1.5 * r, -1, 1, -1, 1}, 1e-12);
  ExpectValues(out[1], {2.5, 11}, 1e-12);
  ExpectValues(out[2], {1.25, 1}, 1e-12);
}

TEST(LayerNormTest, ShapeErrors) {
  const ir::TensorType x{{2, 3, 4}, DataType::kFloat32};
  const ir::TensorType bad_scale{{4}, DataType::kFloat32};
  ExpectBuildError("layer_norm", {&x, &bad_scale, nullptr}, {{"begin_norm_axis", int64_t{1}}}, "12 elements");
  ExpectBuildError("layer_norm", {&x}, {{"begin_norm_axis", int64_t{3}}}, "begin_norm_axis 3 out of range");
  const ir::TensorType f64_scale{{4}, DataType::kFloat64};
  ExpectBuildError("layer_norm", {&x, &f64_scale}, {{"begin_norm_axis", int64_t{2}}}, "scale must be f32");
  // A negative or non-finite epsilon (under the square root) made nan statistics at run time.
  ExpectBuildError("layer_norm", {&x}, {{"begin_norm_axis", int64_t{2}}, {"epsilon", -1.0}},
                   "epsilon -1 must be >= 0 and finite");
  ExpectBuildError("rms_norm", {&x, &bad_scale}, {{"begin_norm_axis", int64_t{2}}, {"epsilon", std::nan("")}},
                   "epsilon nan must be >= 0 and finite");
}

// A bf16/f16 norm computes in f32: f32 statistics, and f32 or x-typed parameters (amp o2's form).
TEST(LayerNormTest, ALowPrecisionNormComputesInFloat32) {
  ir::Program program;
  ir::Builder b(&program);
  ir::Value* x = b.Data("x", {{2, 3, 4}, DataType::kBFloat16});
  ir::Value* w = b.Data("w", {{4}, DataType::kFloat32});
  ir::Value* wb = b.Data("wb", {{4}, DataType::kBFloat16});
  const ir::AttributeMap attrs = {{"begin_norm_axis", int64_t{2}}};
  for (ir::Value* param : {w, wb}) {
    auto results = b.Create("layer_norm", {x, param, param}, attrs);
    ASSERT_TRUE(results.ok()) << results.status();
    EXPECT_EQ((*results)[0]->type(), x->type());
    EXPECT_EQ((*results)[1]->type(), (ir::TensorType{{2, 3}, DataType::kFloat32}));
    auto grads = b.Create("layer_norm_grad", {x, param, param, (*results)[1], (*results)[2], (*results)[0]}, attrs);
    ASSERT_TRUE(grads.ok()) << grads.status();
    EXPECT_EQ((*grads)[0]->type(), x->type());
    EXPECT_EQ((*grads)[1]->type(), param->type());
    auto rms = b.Create("rms_norm", {x, param}, attrs);
    ASSERT_TRUE(rms.ok()) << rms.status();
    EXPECT_EQ((*rms)[1]->type().dtype, DataType::kFloat32);
  }
  const ir::TensorType bx{{2, 4}, DataType::kBFloat16}, f32w{{4}, DataType::kFloat32}, f16w{{4}, DataType::kFloat16},
      f32x{{2, 4}, DataType::kFloat32}, bw{{4}, DataType::kBFloat16}, f64x{{2, 4}, DataType::kFloat64};
  ExpectBuildError("layer_norm", {&bx, &f16w}, {}, "scale must be bf16 or f32 with 4 elements");
  ExpectBuildError("layer_norm", {&f32x, &bw}, {}, "scale must be f32 with 4 elements");
  ExpectBuildError("rms_norm", {&f64x, &f32w}, {}, "scale must be f64 with 4 elements");
  ExpectBuildError("layer_norm", {&bx, &f32w, &bw}, {}, "scale and bias must have one dtype");
}

TEST(LayerNormTest, Gradients) {
  ExpectGradientsOk("layer_norm", {{Random64({3, 5}, 1)}, {Random64({5}, 2)}, {Random64({5}, 3)}}, {}, {0});
  ExpectGradientsOk("layer_norm", {{Random64({2, 2, 3}, 4)}, {Random64({6}, 5)}, {Random64({6}, 6)}},
                    {{"begin_norm_axis", int64_t{1}}}, {0});
  ExpectGradientsOk("layer_norm", {{Random64({4, 3}, 7)}, {Tensor()}, {Random64({3}, 8)}}, {}, {0});
  ExpectGradientsOk("layer_norm", {{Random64({4, 3}, 9)}}, {}, {0});  // layer_norm(x): no optional operands
}

// Large enough for the row loops and the column sums of the parameter gradients to run in
// parallel; every number must still match a plain serial computation.
TEST(LayerNormTest, ParallelRowsAndColumnsMatchSerialReference) {
  const int64_t rows = 300, cols = 256;
  const Tensor x = Random64({rows, cols}, 1), scale = Random64({cols}, 2), bias = Random64({cols}, 3);
  const Tensor g = Random64({rows, cols}, 4);
  const std::vector<Tensor> fwd = RunOk("layer_norm", {x, scale, bias});
  ASSERT_EQ(fwd.size(), 3u);
  const std::vector<Tensor> bwd = RunOk("layer_norm_grad", {x, scale, bias, fwd[1], fwd[2], g});
  ASSERT_EQ(bwd.size(), 3u);
  std::vector<double> scale_grad(cols, 0), bias_grad(cols, 0);
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t c = 0; c < cols; ++c) mean += x.At(r * cols + c) / cols;
    for (int64_t c = 0; c < cols; ++c) var += std::pow(x.At(r * cols + c) - mean, 2) / cols;
    EXPECT_NEAR(fwd[1].At(r), mean, 1e-12);
    EXPECT_NEAR(fwd[2].At(r), var, 1e-12);
    for (int64_t c = 0; c < cols; ++c) {
      const double xhat = (x.At(r * cols + c) - mean) / std::sqrt(var + 1e-5);
      EXPECT_NEAR(fwd[0].At(r * cols + c), xhat * scale.At(c) + bias.At(c), 1e-12);
      scale_grad[c] += g.At(r * cols + c) * xhat;
      bias_grad[c] += g.At(r * cols + c);
    }
  }
  ExpectValues(bwd[1], scale_grad, 1e-11, "scale_grad");
  ExpectValues(bwd[2], bias_grad, 1e-11, "bias_grad");
}

TEST(RmsNormTest, OneRow) {
  const std::vector<Tensor> out = RunOk("rms_norm", {F64({1, 4}, {1, 2, 3, 4}), F64({4}, {1, 0.5, 2, 1})});
  ASSERT_EQ(out.size(), 2u);
  // mean(x²) = 7.5, invvar = 1 / sqrt(7.5 + 1e-6).
  ExpectValues(out[0], {0.3651483473268884, 0.3651483473268884, 2.1908900839613303, 1.4605933893075536}, 1e-12);
  ExpectValues(out[1], {0.3651483473268884}, 1e-12);
}

TEST(RmsNormTest, DefaultNormalisesLastAxis) {
  ir::Program program;
  ir::Builder b(&program);
  ir::Value* x = b.Data("x", {{2, 3, 8}, DataType::kFloat32});
  ir::Value* w = b.Data("w", {{8}, DataType::kFloat32});
  auto results = b.Create("rms_norm", {x, w});
  ASSERT_TRUE(results.ok()) << results.status();
  EXPECT_EQ((*results)[1]->type().shape, (Shape{2, 3}));
}

TEST(RmsNormTest, ShapeErrors) {
  const ir::TensorType x{{2, 8}, DataType::kFloat32};
  const ir::TensorType w{{4}, DataType::kFloat32};
  ExpectBuildError("rms_norm", {&x, &w}, {}, "8 elements");
  const ir::TensorType ids{{2, 8}, DataType::kInt32};
  const ir::TensorType w8{{8}, DataType::kFloat32};
  ExpectBuildError("rms_norm", {&ids, &w8}, {}, "floating point");
}

TEST(RmsNormTest, Gradients) {
  ExpectGradientsOk("rms_norm", {{Random64({3, 4}, 1)}, {Random64({4}, 2)}}, {}, {0});
  ExpectGradientsOk("rms_norm", {{Random64({2, 2, 3}, 3)}, {Random64({6}, 4)}}, {{"begin_norm_axis", int64_t{1}}}, {0});
}

}  // namespace
}  // namespace pdist::nn_test
