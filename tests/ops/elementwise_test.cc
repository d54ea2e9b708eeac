// Tests of the elementwise binary family: forward values, broadcasting, shape errors, gradient
// ops (sums over broadcast dims, maximum's tie rule) and finite-difference gradient checks.
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_join.h"
#include "executor/kernel.h"
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
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

// out[i] for a row-major index into `out_shape`, reading `in` broadcast numpy-style: the naive
// reference for the strided kernels.
double BroadcastAt(const Tensor& in, const Shape& out_shape, int64_t flat) {
  int64_t offset = 0, stride = 1;
  for (int64_t d = static_cast<int64_t>(out_shape.size()) - 1; d >= 0; --d) {
    const int64_t index = flat % out_shape[d];
    flat /= out_shape[d];
    const int64_t in_d = d - static_cast<int64_t>(out_shape.size() - in.shape().size());
    if (in_d < 0) continue;
    const int64_t size = in.shape()[in_d];
    if (size != 1) offset += index * stride;
    stride *= size;
  }
  return in.At(offset);
}

TEST(ElementwiseTest, AddSameShape) {
  std::vector<Tensor> out = MustRun("add", {F32({2, 2}, {1, 2, 3, 4}), F32({2, 2}, {10, 20, 30, 40})});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].type(), (ir::TensorType{{2, 2}, DataType::kFloat32}));
  EXPECT_THAT(Values(out[0]), ElementsAre(11, 22, 33, 44));
}

TEST(ElementwiseTest, AddBroadcastsVectorOverRows) {
  std::vector<Tensor> out = MustRun("add", {F32({2, 3}, {1, 2, 3, 4, 5, 6}), F32({3}, {10, 20, 30})});
  EXPECT_EQ(out[0].shape(), (Shape{2, 3}));
  EXPECT_THAT(Values(out[0]), ElementsAre(11, 22, 33, 14, 25, 36));
}

TEST(ElementwiseTest, MultiplyColumnByRow) {
  std::vector<Tensor> out = MustRun("multiply", {F32({2, 1}, {1, 2}), F32({1, 3}, {3, 4, 5})});
  EXPECT_EQ(out[0].shape(), (Shape{2, 3}));
  EXPECT_THAT(Values(out[0]), ElementsAre(3, 4, 5, 6, 8, 10));
}

TEST(ElementwiseTest, SubtractScalarOnEitherSide) {
  EXPECT_THAT(Values(MustRun("subtract", {F32({3}, {1, 2, 3}), F32({}, {1})})[0]), ElementsAre(0, 1, 2));
  EXPECT_THAT(Values(MustRun("subtract", {F32({}, {1}), F32({3}, {1, 2, 3})})[0]), ElementsAre(0, -1, -2));
}

TEST(ElementwiseTest, DivideAndMaximum) {
  EXPECT_THAT(Values(MustRun("divide", {F64({2}, {1, 3}), F64({2}, {2, 4})})[0]), ElementsAre(0.5, 0.75));
  EXPECT_THAT(Values(MustRun("maximum", {F64({4}, {1, 5, -2, 3}), F64({4}, {2, 4, -2, 7})})[0]),
              ElementsAre(2, 5, -2, 7));
}

TEST(ElementwiseTest, ComparisonsGiveBool) {
  const Tensor x = F32({2, 3}, {1, 5, 3, 4, 2, 6});
  const Tensor y = F32({3}, {2, 2, 3});
  std::vector<Tensor> gt = MustRun("greater_than", {x, y});
  EXPECT_EQ(gt[0].type(), (ir::TensorType{{2, 3}, DataType::kBool}));
  EXPECT_THAT(Values(gt[0]), ElementsAre(0, 1, 0, 1, 0, 1));
  EXPECT_THAT(Values(MustRun("less_than", {x, y})[0]), ElementsAre(1, 0, 0, 0, 0, 0));
  EXPECT_THAT(Values(MustRun("equal", {x, y})[0]), ElementsAre(0, 0, 1, 0, 1, 0));
  // Integer operands (labels against an ignore index).
  const Tensor labels = exec::TensorFromDoubles({{4}, DataType::kInt64}, {3, -100, 0, -100});
  const Tensor ignore = exec::TensorFromDoubles({{}, DataType::kInt64}, {-100});
  EXPECT_THAT(Values(MustRun("equal", {labels, ignore})[0]), ElementsAre(0, 1, 0, 1));
}

// Shapes whose broadcast is neither a row nor a scalar, and a size large enough to be split
// across threads mid-row: every element checked against the naive reference.
TEST(ElementwiseTest, GeneralBroadcastMatchesReference) {
  const std::vector<std::tuple<Shape, Shape>> cases = {
      {{2, 1, 3}, {4, 1}}, {{3, 1, 5, 1}, {1, 4, 1, 2}}, {{300, 257}, {257}}, {{300, 1}, {1, 257}}};
  for (const auto& [xs, ys] : cases) {
    const Tensor x = testing::RandomTensor({xs, DataType::kFloat64}, 1);
    const Tensor y = testing::RandomTensor({ys, DataType::kFloat64}, 2);
    const Tensor out = MustRun("subtract", {x, y})[0];
    for (int64_t i = 0; i < out.num_elements(); ++i) {
      ASSERT_EQ(out.At(i), BroadcastAt(x, out.shape(), i) - BroadcastAt(y, out.shape(), i))
          << ir::ShapeToString(xs) << " - " << ir::ShapeToString(ys) << " at " << i;
    }
  }
}

absl::Status BuildStatus(const std::string& op, const std::vector<ir::TensorType>& types) {
  ir::Program program;
  ir::Builder b(&program);
  std::vector<ir::Value*> operands;
  for (size_t i = 0; i < types.size(); ++i) operands.push_back(b.Data("in" + std::to_string(i), types[i]));
  return b.Create(op, operands).status();
}

TEST(ElementwiseTest, MismatchedShapesAreRejected) {
  const absl::Status s = BuildStatus("add", {{{2, 3}, DataType::kFloat32}, {{4}, DataType::kFloat32}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("add(f32[2,3], f32[4])"));
  EXPECT_THAT(s.message(), HasSubstr("do not broadcast"));

  const absl::Status dtype = BuildStatus("multiply", {{{3}, DataType::kFloat32}, {{3}, DataType::kFloat64}});
  EXPECT_THAT(dtype.message(), HasSubstr("same dtype"));

  const absl::Status grad = BuildStatus("add_grad", {{{2, 3}, DataType::kFloat32},
                                                     {{3}, DataType::kFloat32},
                                                     {{3, 3}, DataType::kFloat32}});
  EXPECT_EQ(grad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(grad.message(), HasSubstr("out_grad must be f32[2,3]"));
}

TEST(ElementwiseGradTest, AddGradSumsOverBroadcastDims) {
  std::vector<Tensor> g = MustRun("add_grad", {F64({2, 3}, {0, 0, 0, 0, 0, 0}), F64({3}, {0, 0, 0}),
                                           F64({2, 3}, {1, 2, 3, 4, 5, 6})});
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].shape(), (Shape{2, 3}));
  EXPECT_THAT(Values(g[0]), ElementsAre(1, 2, 3, 4, 5, 6));
  EXPECT_EQ(g[1].shape(), (Shape{3}));
  EXPECT_THAT(Values(g[1]), ElementsAre(5, 7, 9));
}

// Runs `type` (x, y, out_grad) → (x_grad, y_grad) through the CPU kernel registry on these
// tensors themselves, so that a result can be seen to be one of them.
std::vector<Tensor> RunGradKernel(const std::string& type, const Tensor& x, const Tensor& y, const Tensor& g) {
  ir::Program p;
  ir::Builder b(&p);
  absl::StatusOr<std::vector<ir::Value*>> op =
      b.Create(type, {b.Data("x", x.type()), b.Data("y", y.type()), b.Data("g", g.type())});
  EXPECT_TRUE(op.ok()) << op.status();
  std::vector<Tensor> out(2);
  if (!op.ok()) return out;
  exec::KernelContext ctx(*p.block().ops().back(), {nullptr, nullptr, &g}, &out);  // x, y: type only
  const exec::KernelFn* kernel = exec::KernelRegistry::Global().Find(exec::DeviceType::kCPU, type);
  EXPECT_NE(kernel, nullptr);
  if (kernel != nullptr) EXPECT_TRUE((*kernel)(ctx).ok());
  return out;
}

// An operand of add that was not broadcast has out_grad itself for its gradient: the kernel hands
// back out_grad's tensor (ir::OpDef::aliases_if_same_type), in f32 and through the bf16 float
// math alike; a broadcast operand, and subtract's y (−g), get tensors of their own.
TEST(ElementwiseGradTest, AGradientThatIsTheOutputGradientIsNotCopied) {
  for (DataType dtype : {DataType::kFloat32, DataType::kBFloat16}) {
    const Tensor g = Literal({2, 3}, {1, 2, 3, 4, 5, 6}, dtype);
    const Tensor x = Literal({2, 3}, {0, 0, 0, 0, 0, 0}, dtype), bias = Literal({3}, {0, 0, 0}, dtype);
    std::vector<Tensor> add = RunGradKernel("add_grad", x, bias, g);
    ASSERT_TRUE(add[0].defined() && add[1].defined());
    EXPECT_EQ(add[0].buffer_id(), g.buffer_id()) << ir::DataTypeName(dtype);
    EXPECT_NE(add[1].buffer_id(), g.buffer_id());
    EXPECT_THAT(Values(add[1]), ElementsAre(5, 7, 9));
    std::vector<Tensor> residual = RunGradKernel("add_grad", x, x, g);
    EXPECT_EQ(residual[0].buffer_id(), g.buffer_id());
    EXPECT_EQ(residual[1].buffer_id(), g.buffer_id());
    std::vector<Tensor> sub = RunGradKernel("subtract_grad", x, x, g);
    EXPECT_EQ(sub[0].buffer_id(), g.buffer_id());
    EXPECT_NE(sub[1].buffer_id(), g.buffer_id());
    EXPECT_THAT(Values(sub[1]), ElementsAre(-1, -2, -3, -4, -5, -6));
  }
}

TEST(ElementwiseGradTest, AliasedOperandFollowsTheTypes) {
  ir::Program p;
  ir::Builder b(&p);
  ir::Value* x = b.Data("x", {{2, 3}, DataType::kFloat32});
  ir::Value* bias = b.Data("b", {{3}, DataType::kFloat32});
  ASSERT_TRUE(b.Create("add_grad", {x, bias, x}).ok());
  const ir::Operation& bias_add = *p.block().ops().back();
  EXPECT_EQ(ir::AliasedOperand(bias_add, 0), std::optional<size_t>{2});
  EXPECT_EQ(ir::AliasedOperand(bias_add, 1), std::nullopt);
  ASSERT_TRUE(b.Create("multiply_grad", {x, x, x}).ok());
  EXPECT_EQ(ir::AliasedOperand(*p.block().ops().back(), 0), std::nullopt);
  ASSERT_TRUE(b.Op1("reshape", {x}, {{"shape", std::vector<int64_t>{3, 2}}}).ok());
  EXPECT_EQ(ir::AliasedOperand(*p.block().ops().back(), 0), std::optional<size_t>{0});
}

TEST(ElementwiseGradTest, MultiplyGradOfOuterProduct) {
  // out[i][j] = x[i] * y[j]: x_grad[i] = Σj g[i][j] y[j], y_grad[j] = Σi g[i][j] x[i].
  std::vector<Tensor> g = MustRun("multiply_grad", {F64({2, 1}, {1, 2}), F64({1, 3}, {3, 4, 5}),
                                                F64({2, 3}, {1, 0, 2, 0, 1, 1})});
  EXPECT_EQ(g[0].shape(), (Shape{2, 1}));
  EXPECT_THAT(Values(g[0]), ElementsAre(13, 9));
  EXPECT_EQ(g[1].shape(), (Shape{1, 3}));
  EXPECT_THAT(Values(g[1]), ElementsAre(1, 2, 4));
}

TEST(ElementwiseGradTest, MaximumTiesGoToY) {
  std::vector<Tensor> g = MustRun("maximum_grad", {F64({3}, {1, 3, 2}), F64({3}, {1, 1, 3}), F64({3}, {10, 20, 30})});
  EXPECT_THAT(Values(g[0]), ElementsAre(0, 20, 0));
  EXPECT_THAT(Values(g[1]), ElementsAre(10, 0, 30));
}

// Summed gradients are bitwise identical for any thread count, and equal to a plain row-major
// sum: bias-like ([m,n] → [n]), row sums ([m,n] → [m,1]) and a scalar.
TEST(ElementwiseGradTest, BroadcastSumsAreDeterministic) {
  const Shape out_shape = {400, 300};
  const Tensor g = testing::RandomTensor({out_shape, DataType::kFloat64}, 3);
  for (const Shape& y_shape : {Shape{300}, Shape{400, 1}, Shape{}}) {
    const Tensor x = Tensor::Zeros({out_shape, DataType::kFloat64});
    const Tensor y = Tensor::Zeros({y_shape, DataType::kFloat64});
    std::vector<double> reference(static_cast<size_t>(y.num_elements()), 0.0);
    for (int64_t i = 0; i < g.num_elements(); ++i) {
      const int64_t col = i % 300, row = i / 300;
      const int64_t j = y_shape.empty() ? 0 : y_shape.size() == 1 ? col : row;
      reference[static_cast<size_t>(j)] += g.At(i);
    }
    std::vector<std::vector<double>> per_threads;
    for (int threads : {1, 2, 3}) {
#ifdef _OPENMP
      omp_set_num_threads(threads);
#endif
      per_threads.push_back(Values(MustRun("add_grad", {x, y, g})[1]));
    }
    for (const std::vector<double>& got : per_threads) {
      EXPECT_THAT(got, ElementsAreArray(reference)) << "y " << ir::ShapeToString(y_shape);
    }
  }
#ifdef _OPENMP
  omp_set_num_threads(2);
#endif
}

// Finite-difference checks of every differentiable binary op over broadcasting shape pairs.
using GradCase = std::tuple<std::string, Shape, Shape>;
class BinaryGradTest : public ::testing::TestWithParam<GradCase> {};

TEST_P(BinaryGradTest, MatchesFiniteDifferences) {
  const auto& [op, x_shape, y_shape] = GetParam();
  const Tensor x = testing::RandomTensor({x_shape, DataType::kFloat64}, 11);
  // divide: keep y away from 0; maximum: distinct draws make ties impossible.
  const Tensor y = op == "divide" ? testing::RandomTensor({y_shape, DataType::kFloat64}, 12, 0.5, 2.0)
                                  : testing::RandomTensor({y_shape, DataType::kFloat64}, 12);
  const absl::Status s = testing::CheckOpGradients(op, {{x}, {y}}, {});
  EXPECT_TRUE(s.ok()) << s;
}

INSTANTIATE_TEST_SUITE_P(
    Ops, BinaryGradTest,
    ::testing::Combine(::testing::Values("add", "subtract", "multiply", "divide", "maximum"),
                       ::testing::Values(Shape{2, 3}, Shape{2, 1}),
                       ::testing::Values(Shape{2, 3}, Shape{3}, Shape{1, 3}, Shape{})),
    [](const ::testing::TestParamInfo<GradCase>& info) {
      auto name = [](const Shape& s) { return s.empty() ? std::string("scalar") : absl::StrJoin(s, "x"); };
      return std::get<0>(info.param) + "_" + name(std::get<1>(info.param)) + "_" + name(std::get<2>(info.param));
    });

TEST(BinaryGradTest, RankThreeBroadcast) {
  const Tensor x = testing::RandomTensor({{2, 1, 3}, DataType::kFloat64}, 21);
  const Tensor y = testing::RandomTensor({{4, 1}, DataType::kFloat64}, 22, 0.5, 2.0);
  for (const char* op : {"multiply", "divide"}) {
    const absl::Status s = testing::CheckOpGradients(op, {{x}, {y}}, {});
    EXPECT_TRUE(s.ok()) << s;
  }
}

}  // namespace
}  // namespace pdist::testing
