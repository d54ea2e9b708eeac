// sum, mean, max, min and their gradients; full. Values by hand and against a naive reduction
// over every subset of axes, shape errors, determinism across thread counts, gradient checks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "ir/builder.h"
#include "ir/op_def.h"
#include "tests/ops/op_test_helpers.h"

namespace pdist::testing {
namespace {

using exec::Tensor;
using ir::DataType;
using ir::Shape;
using ::testing::DoubleEq;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr DataType kF64 = DataType::kFloat64;

// Reduces x over the axes marked in `reduced` the slow way: one pass over x, in index order.
std::vector<double> NaiveReduce(const std::string& op, const Tensor& x, const std::vector<bool>& reduced) {
  const Shape& shape = x.shape();
  Shape out_shape;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!reduced[d]) out_shape.push_back(shape[d]);
  }
  const double init = op == "max" ? -INFINITY : op == "min" ? INFINITY : 0.0;
  std::vector<double> out(static_cast<size_t>(ir::NumElements(out_shape)), init);
  const std::vector<double> xv = Values(x);
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    int64_t rest = i, o = 0, stride = 1;
    for (size_t d = shape.size(); d-- > 0;) {
      const int64_t c = rest % shape[d];
      rest /= shape[d];
      if (!reduced[d]) {
        o += c * stride;
        stride *= shape[d];
      }
    }
    double& acc = out[o];
    acc = op == "max" ? std::max(acc, xv[i]) : op == "min" ? std::min(acc, xv[i]) : acc + xv[i];
  }
  if (op == "mean") {
    for (double& v : out) v /= static_cast<double>(x.num_elements()) / static_cast<double>(out.size());
  }
  return out;
}

TEST(ReductionTest, SumByHand) {
  const Tensor x = Literal({2, 3}, {1, 2, 3, 4, 5, 6});
  std::vector<Tensor> all = MustRun("sum", {x});
  EXPECT_EQ(all[0].shape(), Shape{});
  EXPECT_THAT(Values(all[0]), ElementsAre(21));
  std::vector<Tensor> cols = MustRun("sum", {x}, {{"axis", std::vector<int64_t>{0}}});
  EXPECT_EQ(cols[0].shape(), Shape{3});
  EXPECT_THAT(Values(cols[0]), ElementsAre(5, 7, 9));
  std::vector<Tensor> rows = MustRun("sum", {x}, {{"axis", std::vector<int64_t>{-1}}, {"keep_dim", true}});
  EXPECT_EQ(rows[0].shape(), (Shape{2, 1}));
  EXPECT_THAT(Values(rows[0]), ElementsAre(6, 15));
  std::vector<Tensor> all_kept = MustRun("sum", {x}, {{"keep_dim", true}});
  EXPECT_EQ(all_kept[0].shape(), (Shape{1, 1}));
}

TEST(ReductionTest, MeanMaxMinByHand) {
  // x[2,2,2] = [[[1,8],[3,-4]], [[5,6],[-7,2]]]; reduce axes 0 and -1 (keep the middle one).
  const Tensor x = Literal({2, 2, 2}, {1, 8, 3, -4, 5, 6, -7, 2});
  const ir::AttributeMap attrs = {{"axis", std::vector<int64_t>{0, -1}}};
  EXPECT_THAT(Values(MustRun("mean", {x}, attrs)[0]), ElementsAre(5, -1.5));
  EXPECT_THAT(Values(MustRun("max", {x}, attrs)[0]), ElementsAre(8, 3));
  EXPECT_THAT(Values(MustRun("min", {x}, attrs)[0]), ElementsAre(1, -7));
  std::vector<Tensor> kept = MustRun("max", {x}, {{"axis", std::vector<int64_t>{-2}}, {"keep_dim", true}});
  EXPECT_EQ(kept[0].shape(), (Shape{2, 1, 2}));
  EXPECT_THAT(Values(kept[0]), ElementsAre(3, 8, 5, 6));
}

TEST(ReductionTest, EverySubsetOfAxesMatchesNaive) {
  // Includes a size-1 dim, so that coalescing of neighbouring dims is exercised.
  const Tensor x = RandomTensor({{3, 4, 1, 5, 6}, kF64}, 3);
  for (const std::string op : {"sum", "mean", "max", "min"}) {
    for (int mask = 0; mask < 32; ++mask) {
      std::vector<int64_t> axis;
      std::vector<bool> reduced(5, mask == 0);
      for (int d = 0; d < 5; ++d) {
        if (mask & (1 << d)) {
          axis.push_back(d % 2 ? d - 5 : d);  // mix negative and positive axes
          reduced[d] = true;
        }
      }
      std::vector<Tensor> out = MustRun(op, {x}, {{"axis", axis}});
      ASSERT_EQ(out.size(), 1u);
      const std::vector<double> expected = NaiveReduce(op, x, reduced);
      const std::vector<double> actual = Values(out[0]);
      ASSERT_EQ(actual.size(), expected.size()) << op << " mask " << mask;
      for (size_t i = 0; i < actual.size(); ++i) EXPECT_NEAR(actual[i], expected[i], 1e-12) << op << " mask " << mask;
    }
  }
}

TEST(ReductionTest, LongRowsAndWideColumns) {
  // Rows longer than the 8 accumulator lanes with a tail, and kept columns beyond one block.
  const Tensor x = RandomTensor({{3, 1037}, kF64}, 4);
  const Tensor y = RandomTensor({{7, 1300}, kF64}, 5);
  for (const std::string op : {"sum", "max"}) {
    const std::vector<double> rows = Values(MustRun(op, {x}, {{"axis", std::vector<int64_t>{1}}})[0]);
    const std::vector<double> expect_rows = NaiveReduce(op, x, {false, true});
    for (size_t i = 0; i < rows.size(); ++i) EXPECT_NEAR(rows[i], expect_rows[i], 1e-11);
    const std::vector<double> cols = Values(MustRun(op, {y}, {{"axis", std::vector<int64_t>{0}}})[0]);
    const std::vector<double> expect_cols = NaiveReduce(op, y, {true, false});
    for (size_t i = 0; i < cols.size(); ++i) EXPECT_NEAR(cols[i], expect_cols[i], 1e-12);
  }
}

TEST(ReductionTest, Float32SumAccumulatesInDoubleAndIgnoresThreadCount) {
  // 2^20 + 3 values of 0.1f: a float accumulator would drift far from the exact sum.
  const int64_t n = (1 << 20) + 3;
  const Tensor x = exec::CastTensor(Literal({n}, std::vector<double>(n, 0.1)), DataType::kFloat32);
  const Tensor m = exec::CastTensor(RandomTensor({{512, 2049}, kF64}, 6), DataType::kFloat32);
  const double exact = static_cast<double>(0.1f) * static_cast<double>(n);
  std::vector<std::vector<double>> results;
  for (int threads : {1, 2, 3}) {
#ifdef _OPENMP
    omp_set_num_threads(threads);
#endif
    std::vector<Tensor> total = MustRun("sum", {x});
    EXPECT_EQ(total[0].dtype(), DataType::kFloat32);
    EXPECT_FLOAT_EQ(static_cast<float>(total[0].At(0)), static_cast<float>(exact));
    std::vector<double> r = Values(MustRun("sum", {m}, {{"axis", std::vector<int64_t>{1}}})[0]);
    const std::vector<double> c = Values(MustRun("mean", {m}, {{"axis", std::vector<int64_t>{0}}})[0]);
    r.insert(r.end(), c.begin(), c.end());
    results.push_back(r);
  }
#ifdef _OPENMP
  omp_set_num_threads(2);
#endif
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

TEST(ReductionTest, MaxPropagatesNan) {
  const Tensor x = Literal({4}, {1, NAN, 3, 2});
  EXPECT_TRUE(std::isnan(MustRun("max", {x})[0].At(0)));
  EXPECT_TRUE(std::isnan(MustRun("min", {x})[0].At(0)));
}

// sum_grad and mean_grad read x for its type alone (the executor frees x after the forward and
// their kernels get no tensor: every MustRun below runs so); max_grad and min_grad read it.
TEST(ReductionTest, SumAndMeanGradientsNeedOnlyTheTypeOfX) {
  ir::Program p;
  ir::Builder b(&p);
  ir::Value* x = b.Data("x", {{2, 3}, DataType::kFloat64});
  ir::Value* g = b.Data("g", {{2}, DataType::kFloat64});
  const ir::AttributeMap rows = {{"axis", std::vector<int64_t>{1}}};
  for (const char* type : {"sum_grad", "mean_grad"}) {
    ASSERT_TRUE(b.Create(type, {x, g}, rows).ok());
    EXPECT_FALSE(ir::ReadsOperand(*p.block().ops().back(), 0)) << type;
    EXPECT_TRUE(ir::ReadsOperand(*p.block().ops().back(), 1)) << type;
  }
  ASSERT_TRUE(b.Create("max_grad", {x, *b.Op1("max", {x}, rows), g}, rows).ok());
  EXPECT_TRUE(ir::ReadsOperand(*p.block().ops().back(), 0));
}

TEST(ReductionTest, GradKernelsByHand) {
  const Tensor x = Literal({2, 3}, {1, 3, 3, 4, 0, 4});
  const ir::AttributeMap rows = {{"axis", std::vector<int64_t>{1}}};
  const Tensor g = Literal({2}, {6, -2});
  EXPECT_THAT(Values(MustRun("sum_grad", {x, g}, rows)[0]), ElementsAre(6, 6, 6, -2, -2, -2));
  EXPECT_THAT(Values(MustRun("mean_grad", {x, g}, rows)[0]),
              ElementsAre(2, 2, 2, DoubleEq(-2.0 / 3), DoubleEq(-2.0 / 3), DoubleEq(-2.0 / 3)));
  // Ties split the gradient evenly: 3 and 3 share row 0's 6; 4 and 4 share row 1's -2.
  const Tensor max = MustRun("max", {x}, rows)[0];
  EXPECT_THAT(Values(MustRun("max_grad", {x, max, g}, rows)[0]), ElementsAre(0, 3, 3, -1, 0, -1));
  const Tensor min = MustRun("min", {x}, rows)[0];
  EXPECT_THAT(Values(MustRun("min_grad", {x, min, g}, rows)[0]), ElementsAre(6, 0, 0, 0, -2, 0));
  // Kept columns (reduce axis 0): column 0 has a unique max, column 2 a tie.
  const ir::AttributeMap cols = {{"axis", std::vector<int64_t>{0}}, {"keep_dim", true}};
  const Tensor y = Literal({2, 3}, {1, 5, 2, 0, 5, 2});
  const Tensor ymax = MustRun("max", {y}, cols)[0];
  EXPECT_THAT(Values(MustRun("max_grad", {y, ymax, Literal({1, 3}, {1, 2, 4})}, cols)[0]),
              ElementsAre(1, 1, 2, 0, 1, 2));
}

TEST(ReductionTest, ShapeErrors) {
  EXPECT_THAT(BuildError("sum", {{{2, 3}, kF64}}, {{"axis", std::vector<int64_t>{2}}}),
              HasSubstr("sum(f64[2,3]): axis 2 out of range for rank 2"));
  EXPECT_THAT(BuildError("mean", {{{2, 3}, kF64}}, {{"axis", std::vector<int64_t>{1, -1}}}),
              HasSubstr("axis -1 is named twice"));
  EXPECT_THAT(BuildError("max", {{{2, 3}, DataType::kInt64}}), HasSubstr("floating point"));
  EXPECT_THAT(BuildError("sum_grad", {{{2, 3}, kF64}, {{3}, kF64}}, {{"axis", std::vector<int64_t>{1}}}),
              HasSubstr("must be f64[2] (the reduced type)"));
  EXPECT_THAT(BuildError("full", {}, {{"shape", std::vector<int64_t>{2, -1}}}), HasSubstr("negative dim"));
}

TEST(ReductionTest, ReducingAScalar) {
  std::vector<Tensor> out = MustRun("sum", {Literal({}, {2.5})}, {{"axis", std::vector<int64_t>{0}}});
  EXPECT_EQ(out[0].shape(), Shape{});
  EXPECT_THAT(Values(out[0]), ElementsAre(2.5));
}

TEST(FullTest, FillsEveryDtype) {
  std::vector<Tensor> f = MustRun("full", {}, {{"shape", std::vector<int64_t>{2, 3}}, {"value", 1.5}});
  EXPECT_EQ(f[0].type(), (ir::TensorType{{2, 3}, DataType::kFloat32}));
  EXPECT_THAT(Values(f[0]), ElementsAre(1.5, 1.5, 1.5, 1.5, 1.5, 1.5));
  std::vector<Tensor> i =
      MustRun("full", {}, {{"shape", std::vector<int64_t>{}}, {"value", 7.0}, {"dtype", DataType::kInt64}});
  EXPECT_EQ(i[0].type(), (ir::TensorType{{}, DataType::kInt64}));
  EXPECT_EQ(i[0].data<int64_t>()[0], 7);
}

struct GradCase {
  std::string op;
  Shape x;
  std::vector<int64_t> axis;
  bool keep_dim = false;
};

void PrintTo(const GradCase& c, std::ostream* os) {
  *os << c.op << ir::ShapeToString(c.x) << " axis " << ir::ShapeToString(c.axis) << (c.keep_dim ? " keep_dim" : "");
}

class ReductionGradTest : public ::testing::TestWithParam<GradCase> {};

TEST_P(ReductionGradTest, MatchesFiniteDifferences) {
  const GradCase& c = GetParam();
  // Random values in [-1, 1) have no ties, so max/min are differentiable at the point.
  absl::Status s =
      CheckOpGradients(c.op, {{RandomTensor({c.x, kF64}, 11)}}, {{"axis", c.axis}, {"keep_dim", c.keep_dim}});
  EXPECT_TRUE(s.ok()) << s;
}

INSTANTIATE_TEST_SUITE_P(Ops, ReductionGradTest,
                         ::testing::Values(GradCase{"sum", {3, 4}, {}}, GradCase{"sum", {2, 3, 4}, {1}, true},
                                           GradCase{"sum", {2, 3, 4}, {0, -1}}, GradCase{"mean", {3, 4}, {}},
                                           GradCase{"mean", {2, 3, 4}, {-1}, true}, GradCase{"mean", {2, 3, 4}, {0, 2}},
                                           GradCase{"max", {3, 4}, {}}, GradCase{"max", {2, 3, 4}, {1}},
                                           GradCase{"max", {2, 3, 4}, {0, 2}, true}, GradCase{"min", {3, 4}, {-1}},
                                           GradCase{"min", {2, 3, 4}, {0}, true}));

}  // namespace
}  // namespace pdist::testing
