// matmul and matmul_grad: values (transposes, 1-D operands, broadcast batches), shape errors,
// cost, and gradients against finite differences.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ir/op_def.h"
#include "tests/ops/op_test_helpers.h"

namespace pdist::testing {
namespace {

using exec::Tensor;
using ir::DataType;
using ir::Shape;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

constexpr DataType kF64 = DataType::kFloat64;

// A = [[1,2,3],[4,5,6]], B = [[1,2],[3,4],[5,6]], A·B = [[22,28],[49,64]].
const std::vector<double> kA = {1, 2, 3, 4, 5, 6};
const std::vector<double> kAt = {1, 4, 2, 5, 3, 6};  // Aᵀ stored [3,2]
const std::vector<double> kB = {1, 2, 3, 4, 5, 6};
const std::vector<double> kBt = {1, 3, 5, 2, 4, 6};  // Bᵀ stored [2,3]
const std::vector<double> kAB = {22, 28, 49, 64};

// Reference batched product with numpy broadcasting of the batch dims; x [.., m, k], y [.., k, n]
// (no transposes, rank >= 2).
std::vector<double> NaiveMatmul(const Tensor& x, const Tensor& y, Shape& out_shape) {
  const Shape& xs = x.shape();
  const Shape& ys = y.shape();
  const int64_t m = xs[xs.size() - 2], k = xs.back(), n = ys.back();
  const size_t rank = std::max(xs.size(), ys.size());
  Shape xb(rank - 2, 1), yb(rank - 2, 1), batch(rank - 2);
  std::copy(xs.begin(), xs.end() - 2, xb.end() - (xs.size() - 2));
  std::copy(ys.begin(), ys.end() - 2, yb.end() - (ys.size() - 2));
  for (size_t i = 0; i < batch.size(); ++i) batch[i] = std::max(xb[i], yb[i]);
  out_shape = batch;
  out_shape.push_back(m);
  out_shape.push_back(n);
  const std::vector<double> xv = exec::TensorToDoubles(x), yv = exec::TensorToDoubles(y);
  std::vector<double> out(static_cast<size_t>(ir::NumElements(out_shape)), 0.0);
  for (int64_t b = 0; b < ir::NumElements(batch); ++b) {
    int64_t xi = 0, yi = 0, rest = b, xstride = 1, ystride = 1;
    for (size_t d = batch.size(); d-- > 0;) {
      const int64_t i = rest % batch[d];
      rest /= batch[d];
      xi += (xb[d] == 1 ? 0 : i) * xstride;
      yi += (yb[d] == 1 ? 0 : i) * ystride;
      xstride *= xb[d];
      ystride *= yb[d];
    }
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t c = 0; c < n; ++c) {
        double acc = 0;
        for (int64_t j = 0; j < k; ++j) acc += xv[(xi * m + r) * k + j] * yv[(yi * k + j) * n + c];
        out[(b * m + r) * n + c] = acc;
      }
    }
  }
  return out;
}

void ExpectNear(const std::vector<double>& actual, const std::vector<double>& expected, double tol) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) EXPECT_NEAR(actual[i], expected[i], tol) << "element " << i;
}

// Runs matmul on x, y and compares with the naive product.
void ExpectMatchesNaive(const Tensor& x, const Tensor& y, double tol = 1e-12) {
  std::vector<Tensor> out = MustRun("matmul", {x, y});
  ASSERT_EQ(out.size(), 1u);
  Shape shape;
  const std::vector<double> expected = NaiveMatmul(x, y, shape);
  EXPECT_EQ(out[0].shape(), shape);
  ExpectNear(exec::TensorToDoubles(out[0]), expected, tol);
}

TEST(MatmulTest, TwoDimensionalWithEveryTransposeCombination) {
  struct Case {
    bool trans_x, trans_y;
    Shape x_shape, y_shape;
    std::vector<double> x, y;
  };
  const Case cases[] = {{false, false, {2, 3}, {3, 2}, kA, kB},
                        {true, false, {3, 2}, {3, 2}, kAt, kB},
                        {false, true, {2, 3}, {2, 3}, kA, kBt},
                        {true, true, {3, 2}, {2, 3}, kAt, kBt}};
  for (const Case& c : cases) {
    std::vector<Tensor> out = MustRun("matmul", {Literal(c.x_shape, c.x), Literal(c.y_shape, c.y)},
                                      {{"trans_x", c.trans_x}, {"trans_y", c.trans_y}});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].shape(), (Shape{2, 2}));
    EXPECT_THAT(exec::TensorToDoubles(out[0]), ElementsAreArray(kAB)) << c.trans_x << c.trans_y;
  }
}

TEST(MatmulTest, OneDimensionalOperandsArePromotedAndDropped) {
  const Tensor v3 = Literal({3}, {1, 2, 3});
  // [3]·[3] → [] (a dot product).
  std::vector<Tensor> dot = MustRun("matmul", {v3, Literal({3}, {4, 5, 6})});
  EXPECT_EQ(dot[0].shape(), Shape{});
  EXPECT_THAT(exec::TensorToDoubles(dot[0]), ElementsAre(32));
  // [3]·[3,2] → [2]: the row vector times B.
  std::vector<Tensor> vm = MustRun("matmul", {v3, Literal({3, 2}, kB)});
  EXPECT_EQ(vm[0].shape(), Shape{2});
  EXPECT_THAT(exec::TensorToDoubles(vm[0]), ElementsAre(22, 28));
  // [2,3]·[3] → [2]; trans_y is ignored for a 1-D y, trans_x still applies to x.
  std::vector<Tensor> mv = MustRun("matmul", {Literal({3, 2}, kAt), v3}, {{"trans_x", true}, {"trans_y", true}});
  EXPECT_EQ(mv[0].shape(), Shape{2});
  EXPECT_THAT(exec::TensorToDoubles(mv[0]), ElementsAre(14, 32));
  // [2,2,3]·[3] → [2,2].
  std::vector<Tensor> bv = MustRun("matmul", {Literal({2, 2, 3}, {1, 2, 3, 4, 5, 6, 0, 0, 1, 1, 0, 0}), v3});
  EXPECT_EQ(bv[0].shape(), (Shape{2, 2}));
  EXPECT_THAT(exec::TensorToDoubles(bv[0]), ElementsAre(14, 32, 3, 1));
}

TEST(MatmulTest, BroadcastBatchDims) {
  // [2,1,3,4]·[5,4,2] → [2,5,3,2]: x's batch dim 1 and y's missing leading dim broadcast.
  const Tensor x = RandomTensor({{2, 1, 3, 4}, kF64}, 1);
  const Tensor y = RandomTensor({{5, 4, 2}, kF64}, 2);
  EXPECT_EQ(InferTypes("matmul", {x.type(), y.type()})[0].shape, (Shape{2, 5, 3, 2}));
  ExpectMatchesNaive(x, y);
  // A single matrix against a batch, both ways (the folded [B·m,k]·[k,n] path and its mirror).
  ExpectMatchesNaive(RandomTensor({{3, 5, 4}, kF64}, 3), RandomTensor({{4, 6}, kF64}, 4));
  ExpectMatchesNaive(RandomTensor({{5, 4}, kF64}, 5), RandomTensor({{3, 4, 6}, kF64}, 6));
}

TEST(MatmulTest, BatchOneElementHandComputed) {
  // The [2,1,3,4]·[5,4,2] case by hand for one output batch: x[1,0] = ones, y[3] = i-th row [i, -i].
  std::vector<double> xv(24, 0.0), yv(40, 0.0);
  for (int i = 12; i < 24; ++i) xv[i] = 1.0;  // x[1,0,:,:] = 1
  for (int r = 0; r < 4; ++r) {               // y[3,r,:] = [r, -r]
    yv[(3 * 4 + r) * 2 + 0] = r;
    yv[(3 * 4 + r) * 2 + 1] = -r;
  }
  std::vector<Tensor> out = MustRun("matmul", {Literal({2, 1, 3, 4}, xv), Literal({5, 4, 2}, yv)});
  const std::vector<double> o = exec::TensorToDoubles(out[0]);
  // out[1,3] = ones[3,4]·y[3] = every row [0+1+2+3, -(0+1+2+3)] = [6, -6].
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(o[((1 * 5 + 3) * 3 + r) * 2 + 0], 6);
    EXPECT_EQ(o[((1 * 5 + 3) * 3 + r) * 2 + 1], -6);
  }
  // out[0, *] = 0 (x[0] is zero).
  for (int i = 0; i < 5 * 3 * 2; ++i) EXPECT_EQ(o[i], 0);
}

TEST(MatmulTest, LargeAndManyBatchesMatchNaive) {
  // Large enough for Eigen's blocked (and threaded) GEMM, and many small batches for the
  // batch-parallel path.
  ExpectMatchesNaive(RandomTensor({{130, 70}, kF64}, 7), RandomTensor({{70, 90}, kF64}, 8), 1e-10);
  ExpectMatchesNaive(RandomTensor({{64, 8, 5}, kF64}, 9), RandomTensor({{64, 5, 7}, kF64}, 10), 1e-12);
  ExpectMatchesNaive(RandomTensor({{4, 1, 8, 5}, kF64}, 11), RandomTensor({{1, 16, 5, 7}, kF64}, 12), 1e-12);
}

TEST(MatmulTest, Float32) {
  const Tensor x = exec::CastTensor(RandomTensor({{2, 6, 5}, kF64}, 13), DataType::kFloat32);
  const Tensor y = exec::CastTensor(RandomTensor({{5, 3}, kF64}, 14), DataType::kFloat32);
  std::vector<Tensor> out = MustRun("matmul", {x, y});
  EXPECT_EQ(out[0].dtype(), DataType::kFloat32);
  Shape shape;
  ExpectNear(exec::TensorToDoubles(out[0]), NaiveMatmul(x, y, shape), 1e-5);
}

TEST(MatmulTest, EmptyContractionGivesZeros) {
  std::vector<Tensor> out = MustRun("matmul", {Tensor::Zeros({{2, 0}, kF64}), Tensor::Zeros({{0, 3}, kF64})});
  EXPECT_THAT(exec::TensorToDoubles(out[0]), ElementsAre(0, 0, 0, 0, 0, 0));
}

TEST(MatmulTest, ShapeErrorsNameTheOperands) {
  const std::string k = BuildError("matmul", {{{8, 64}, DataType::kFloat32}, {{32, 16}, DataType::kFloat32}});
  EXPECT_THAT(k, HasSubstr("matmul(f32[8,64], f32[32,16]): contraction dims differ: x [8,64] k=64 vs y [32,16] k=32"));
  EXPECT_THAT(BuildError("matmul", {{{8, 64}, kF64}, {{16, 64}, kF64}}, {{"trans_y", false}}),
              HasSubstr("k=64 vs y [16,64] k=16"));
  EXPECT_EQ(BuildError("matmul", {{{8, 64}, kF64}, {{16, 64}, kF64}}, {{"trans_y", true}}), "");
  EXPECT_THAT(BuildError("matmul", {{{2, 3, 4}, kF64}, {{5, 4, 2}, kF64}}),
              HasSubstr("batch dims: shapes [2] and [5]"));
  EXPECT_THAT(BuildError("matmul", {{{}, kF64}, {{4}, kF64}}), HasSubstr("rank >= 1"));
  EXPECT_THAT(BuildError("matmul", {{{2, 4}, kF64}, {{4, 2}, DataType::kFloat32}}), HasSubstr("one dtype"));
  EXPECT_THAT(BuildError("matmul", {{{2, 4}, DataType::kInt64}, {{4, 2}, DataType::kInt64}}),
              HasSubstr("floating point"));
  EXPECT_THAT(BuildError("matmul_grad", {{{2, 4}, kF64}, {{4, 3}, kF64}, {{2, 2}, kF64}}),
              HasSubstr("out_grad must be f64[2,3]"));
}

TEST(MatmulTest, CostCountsMultiplyAdds) {
  const ir::OpDef* def = ir::OpRegistry::Global().Find("matmul");
  ASSERT_NE(def, nullptr);
  const ir::TensorType x{{2, 1, 3, 4}, DataType::kFloat32}, y{{5, 4, 2}, DataType::kFloat32};
  const ir::TensorType out{{2, 5, 3, 2}, DataType::kFloat32};
  ir::AttributeMap attrs = {{"trans_x", false}, {"trans_y", false}};
  const ir::OpCost cost = def->cost({&x, &y}, {out}, attrs);
  EXPECT_EQ(cost.flops, 2.0 * 10 * 3 * 2 * 4);  // 2·batch·m·n·k
  EXPECT_EQ(cost.bytes, 4.0 * (24 + 40 + 60));
  const ir::OpCost grad = ir::OpRegistry::Global().Find("matmul_grad")->cost({&x, &y, &out}, {x, y}, attrs);
  EXPECT_EQ(grad.flops, 2 * cost.flops);
}

struct GradCase {
  Shape x, y;
  bool trans_x = false, trans_y = false;
};

void PrintTo(const GradCase& c, std::ostream* os) {
  *os << ir::ShapeToString(c.x) << (c.trans_x ? "ᵀ" : "") << "·" << ir::ShapeToString(c.y) << (c.trans_y ? "ᵀ" : "");
}

class MatmulGradTest : public ::testing::TestWithParam<GradCase> {};

TEST_P(MatmulGradTest, MatchesFiniteDifferences) {
  const GradCase& c = GetParam();
  absl::Status s = CheckOpGradients("matmul", {{RandomTensor({c.x, kF64}, 1)}, {RandomTensor({c.y, kF64}, 2)}},
                                    {{"trans_x", c.trans_x}, {"trans_y", c.trans_y}});
  EXPECT_TRUE(s.ok()) << s;
}

INSTANTIATE_TEST_SUITE_P(Shapes, MatmulGradTest,
                         ::testing::Values(GradCase{{3, 4}, {4, 5}}, GradCase{{4, 3}, {4, 5}, true, false},
                                           GradCase{{3, 4}, {5, 4}, false, true}, GradCase{{4, 3}, {5, 4}, true, true},
                                           GradCase{{4}, {4}}, GradCase{{4}, {4, 3}}, GradCase{{3, 4}, {4}},
                                           GradCase{{2, 3, 4}, {4}},
                                           GradCase{{2, 1, 3, 4}, {5, 4, 2}},         // both operands broadcast
                                           GradCase{{2, 3, 4}, {4, 5}},               // folded
                                           GradCase{{2, 3, 4}, {5, 4}, false, true},  // folded, trans_y
                                           GradCase{{2, 4, 3}, {4, 5}, true, false},  // trans_x: not folded
                                           GradCase{{3, 4}, {2, 2, 4, 5}},            // x broadcast
                                           GradCase{{2, 2, 4, 3}, {2, 1, 5, 4}, true, true}));

}  // namespace
}  // namespace pdist::testing
