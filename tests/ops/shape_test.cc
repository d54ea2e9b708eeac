// Shape ops: reshape, unsqueeze, squeeze (views), transpose, split, split_with_num, concat, slice
// and slice_grad. Values by hand and against naive index arithmetic, shape errors, gradients.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "executor/kernel.h"
#include "ir/op_def.h"
#include "tests/ops/op_test_helpers.h"

namespace pdist::testing {
namespace {

using exec::Tensor;
using ir::DataType;
using ir::Shape;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr DataType kF64 = DataType::kFloat64;
using Ints = std::vector<int64_t>;

// 0, 1, 2, ... in `shape`.
Tensor Iota(const Shape& shape, DataType dtype = kF64) {
  std::vector<double> v(static_cast<size_t>(ir::NumElements(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
  return Literal(shape, v, dtype);
}

// --- views -------------------------------------------------------------------------------------

TEST(ReshapeTest, MinusOneAndZero) {
  EXPECT_EQ(InferTypes("reshape", {{{2, 3, 4}, kF64}}, {{"shape", Ints{0, -1}}})[0].shape, (Shape{2, 12}));
  EXPECT_EQ(InferTypes("reshape", {{{2, 3, 4}, kF64}}, {{"shape", Ints{-1, 0, 2}}})[0].shape, (Shape{4, 3, 2}));
  EXPECT_EQ(InferTypes("reshape", {{{2, 3, 4}, kF64}}, {{"shape", Ints{-1}}})[0].shape, (Shape{24}));
  std::vector<Tensor> out = MustRun("reshape", {Iota({2, 3})}, {{"shape", Ints{3, -1}}});
  EXPECT_EQ(out[0].shape(), (Shape{3, 2}));
  EXPECT_THAT(Values(out[0]), ElementsAre(0, 1, 2, 3, 4, 5));
}

TEST(ReshapeTest, Errors) {
  const ir::TensorType x{{2, 3, 4}, kF64};
  EXPECT_THAT(BuildError("reshape", {x}, {{"shape", Ints{-1, -1}}}), HasSubstr("more than one -1"));
  EXPECT_THAT(BuildError("reshape", {x}, {{"shape", Ints{5, -1}}}), HasSubstr("cannot infer the -1 in [5,-1] from 24"));
  EXPECT_THAT(BuildError("reshape", {x}, {{"shape", Ints{4, 5}}}),
              HasSubstr("reshape(f64[2,3,4]): shape [4,5] holds 20 elements, x holds 24"));
  EXPECT_THAT(BuildError("reshape", {x}, {{"shape", Ints{1, 1, 1, 0}}}), HasSubstr("0 at index 3"));
  // 2^61 · 8 · 3 = 3 · 2^64 wraps to 0 in int64 arithmetic: such a product must not pass for an
  // element count.
  EXPECT_THAT(BuildError("reshape", {x}, {{"shape", Ints{int64_t{1} << 61, 8, 3, 1}}}),
              HasSubstr("has more elements than an int64 holds"));
  EXPECT_THAT(BuildError("reshape", {x}, {{"shape", Ints{-2, 12}}}), HasSubstr("negative dim -2"));
}

TEST(ViewTest, KernelsAliasTheInputBuffer) {
  for (const auto& [op, attrs] : std::vector<std::pair<std::string, ir::AttributeMap>>{
           {"reshape", {{"shape", Ints{6}}}}, {"unsqueeze", {{"axis", Ints{0}}}}, {"squeeze", {}}}) {
    ir::Program program;
    ir::Builder b(&program);
    const Tensor x = Iota({2, 1, 3});
    absl::StatusOr<ir::Value*> out = b.Op1(op, {b.Data("x", x.type())}, attrs);
    ASSERT_TRUE(out.ok()) << out.status();
    const exec::KernelFn* kernel = exec::KernelRegistry::Global().Find(exec::DeviceType::kCPU, op);
    ASSERT_NE(kernel, nullptr);
    std::vector<Tensor> outputs(1);
    exec::KernelContext ctx(*(*out)->producer(), {&x}, &outputs);
    ASSERT_TRUE((*kernel)(ctx).ok());
    EXPECT_EQ(outputs[0].buffer_id(), x.buffer_id()) << op;
    EXPECT_EQ(outputs[0].shape(), (*out)->type().shape) << op;
  }
  const ir::TensorType t{{2, 3}, kF64};
  EXPECT_EQ(ir::OpRegistry::Global().Find("reshape")->cost({&t}, {t}, {}).bytes, 0);  // nothing moves
}

TEST(UnsqueezeTest, AxesInsertOneAfterTheOther) {
  const ir::TensorType x{{2, 3}, kF64};
  EXPECT_EQ(InferTypes("unsqueeze", {x}, {{"axis", Ints{0, 2}}})[0].shape, (Shape{1, 2, 1, 3}));
  EXPECT_EQ(InferTypes("unsqueeze", {x}, {{"axis", Ints{-1}}})[0].shape, (Shape{2, 3, 1}));
  EXPECT_EQ(InferTypes("unsqueeze", {x}, {{"axis", Ints{-1, -1}}})[0].shape, (Shape{2, 3, 1, 1}));
  EXPECT_EQ(InferTypes("unsqueeze", {{{}, kF64}}, {{"axis", Ints{0}}})[0].shape, (Shape{1}));
  EXPECT_THAT(BuildError("unsqueeze", {x}, {{"axis", Ints{4}}}),
              HasSubstr("axis 4 out of range for inserting into rank 2"));
}

TEST(SqueezeTest, NamedOrAllSizeOneDims) {
  const ir::TensorType x{{1, 2, 1, 3}, kF64};
  EXPECT_EQ(InferTypes("squeeze", {x})[0].shape, (Shape{2, 3}));
  EXPECT_EQ(InferTypes("squeeze", {x}, {{"axis", Ints{0}}})[0].shape, (Shape{2, 1, 3}));
  EXPECT_EQ(InferTypes("squeeze", {x}, {{"axis", Ints{-2}}})[0].shape, (Shape{1, 2, 3}));
  // A named dim of size > 1 stays (Paddle).
  EXPECT_EQ(InferTypes("squeeze", {x}, {{"axis", Ints{1}}})[0].shape, (Shape{1, 2, 1, 3}));
  EXPECT_THAT(BuildError("squeeze", {x}, {{"axis", Ints{4}}}), HasSubstr("axis 4 out of range for rank 4"));
}

// --- transpose ---------------------------------------------------------------------------------

// out[i0..] = x[...] with out dim i = x dim perm[i], the slow way.
std::vector<double> NaiveTranspose(const Tensor& x, const Ints& perm) {
  const Shape& s = x.shape();
  const size_t rank = s.size();
  Shape out_shape(rank);
  for (size_t i = 0; i < rank; ++i) out_shape[i] = s[perm[i]];
  const std::vector<double> xv = Values(x);
  std::vector<double> out(xv.size());
  for (int64_t o = 0; o < static_cast<int64_t>(out.size()); ++o) {
    Ints idx(rank);
    int64_t rest = o;
    for (size_t i = rank; i-- > 0;) {
      idx[i] = rest % out_shape[i];
      rest /= out_shape[i];
    }
    Ints xi(rank);
    for (size_t i = 0; i < rank; ++i) xi[perm[i]] = idx[i];
    int64_t flat = 0;
    for (size_t d = 0; d < rank; ++d) flat = flat * s[d] + xi[d];
    out[o] = xv[flat];
  }
  return out;
}

TEST(TransposeTest, ByHand) {
  std::vector<Tensor> out = MustRun("transpose", {Iota({2, 3})}, {{"perm", Ints{1, 0}}});
  EXPECT_EQ(out[0].shape(), (Shape{3, 2}));
  EXPECT_THAT(Values(out[0]), ElementsAre(0, 3, 1, 4, 2, 5));
  std::vector<Tensor> neg = MustRun("transpose", {Iota({2, 3})}, {{"perm", Ints{-1, -2}}});
  EXPECT_THAT(Values(neg[0]), ElementsAre(0, 3, 1, 4, 2, 5));
}

TEST(TransposeTest, MatchesNaiveForManyPermutationsAndDtypes) {
  const std::vector<std::pair<Shape, Ints>> cases = {{{2, 3, 4}, {2, 0, 1}},
                                                     {{2, 3, 4}, {1, 0, 2}},  // rows stay contiguous
                                                     {{2, 3, 4}, {0, 2, 1}},
                                                     {{3, 70, 50}, {0, 2, 1}},  // tiles with partial edges
                                                     {{5, 1, 7, 3}, {3, 1, 2, 0}},
                                                     {{2, 3, 4, 5}, {2, 3, 0, 1}},  // merged neighbours
                                                     {{4, 6}, {0, 1}},
                                                     {{2, 3, 4, 5}, {3, 1, 0, 2}}};
  for (const auto& [shape, perm] : cases) {
    for (DataType dtype : {kF64, DataType::kFloat32, DataType::kInt64, DataType::kBool}) {
      const Tensor x = dtype == DataType::kBool ? RandomTensor({shape, dtype}, 3) : Iota(shape, dtype);
      std::vector<Tensor> out = MustRun("transpose", {x}, {{"perm", perm}});
      ASSERT_EQ(out.size(), 1u);
      EXPECT_EQ(Values(out[0]), NaiveTranspose(x, perm)) << ir::ShapeToString(shape) << " " << ir::ShapeToString(perm);
    }
  }
}

TEST(TransposeTest, Errors) {
  const ir::TensorType x{{2, 3, 4}, kF64};
  EXPECT_THAT(BuildError("transpose", {x}, {{"perm", Ints{0, 1}}}),
              HasSubstr("perm [0,1] has 2 entries, x has rank 3"));
  EXPECT_THAT(BuildError("transpose", {x}, {{"perm", Ints{0, 1, -2}}}), HasSubstr("names axis 1 twice"));
  EXPECT_THAT(BuildError("transpose", {x}, {{"perm", Ints{0, 1, 3}}}), HasSubstr("axis 3 out of range"));
}

// --- split / concat ----------------------------------------------------------------------------

TEST(SplitTest, SectionsWithMinusOne) {
  std::vector<Tensor> out = MustRun("split", {Iota({2, 6})}, {{"sections", Ints{1, -1, 2}}, {"axis", int64_t{-1}}});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].shape(), (Shape{2, 1}));
  EXPECT_EQ(out[1].shape(), (Shape{2, 3}));
  EXPECT_EQ(out[2].shape(), (Shape{2, 2}));
  EXPECT_THAT(Values(out[0]), ElementsAre(0, 6));
  EXPECT_THAT(Values(out[1]), ElementsAre(1, 2, 3, 7, 8, 9));
  EXPECT_THAT(Values(out[2]), ElementsAre(4, 5, 10, 11));
  std::vector<Tensor> rows = MustRun("split_with_num", {Iota({4, 2})}, {{"num", int64_t{2}}});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_THAT(Values(rows[1]), ElementsAre(4, 5, 6, 7));
}

TEST(SplitTest, Errors) {
  const ir::TensorType x{{4, 10}, kF64};
  EXPECT_THAT(BuildError("split", {x}, {{"sections", Ints{3, 3}}, {"axis", int64_t{1}}}),
              HasSubstr("sections [3,3] do not add up to 10"));
  EXPECT_THAT(BuildError("split", {x}, {{"sections", Ints{-1, -1}}, {"axis", int64_t{1}}}),
              HasSubstr("at most one -1"));
  EXPECT_THAT(BuildError("split", {x}, {{"sections", Ints{11, -1}}, {"axis", int64_t{1}}}), HasSubstr("do not add up"));
  EXPECT_THAT(BuildError("split_with_num", {x}, {{"num", int64_t{3}}}), HasSubstr("num 3 must be positive and divide"));
  EXPECT_THAT(BuildError("split", {x}, {{"sections", Ints{4}}, {"axis", int64_t{2}}}),
              HasSubstr("axis 2 out of range"));
}

TEST(ConcatTest, JoinsAlongAxis) {
  std::vector<Tensor> out =
      MustRun("concat", {Iota({2, 2}), Literal({2, 1}, {9, 8}), Iota({2, 0})}, {{"axis", int64_t{-1}}});
  EXPECT_EQ(out[0].shape(), (Shape{2, 3}));
  EXPECT_THAT(Values(out[0]), ElementsAre(0, 1, 9, 2, 3, 8));
  std::vector<Tensor> rows = MustRun("concat", {Iota({1, 2}), Iota({2, 2})}, {{"axis", int64_t{0}}});
  EXPECT_THAT(Values(rows[0]), ElementsAre(0, 1, 0, 1, 2, 3));
}

TEST(ConcatTest, Errors) {
  EXPECT_THAT(BuildError("concat", {{{2, 3}, kF64}, {{3, 3}, kF64}}, {{"axis", int64_t{1}}}),
              HasSubstr("operand 1 (f64[3,3]) differs from operand 0 (f64[2,3]) in dtype or in a dim other than 1"));
  EXPECT_THAT(BuildError("concat", {{{2, 3}, kF64}, {{2, 3}, DataType::kFloat32}}), HasSubstr("differs"));
  EXPECT_THAT(BuildError("concat", {}), HasSubstr("at least one operand"));
}

// --- slice -------------------------------------------------------------------------------------

TEST(SliceTest, NegativeAndOutOfRangeBoundsClamp) {
  const Tensor x = Iota({4, 5});
  std::vector<Tensor> out = MustRun("slice", {x}, {{"axes", Ints{1}}, {"starts", Ints{-3}}, {"ends", Ints{100}}});
  EXPECT_EQ(out[0].shape(), (Shape{4, 3}));
  EXPECT_THAT(Values(out[0]), ElementsAre(2, 3, 4, 7, 8, 9, 12, 13, 14, 17, 18, 19));
  std::vector<Tensor> both =
      MustRun("slice", {x}, {{"axes", Ints{0, -1}}, {"starts", Ints{-100, 1}}, {"ends", Ints{-2, -1}}});
  EXPECT_EQ(both[0].shape(), (Shape{2, 3}));
  EXPECT_THAT(Values(both[0]), ElementsAre(1, 2, 3, 6, 7, 8));
  std::vector<Tensor> empty = MustRun("slice", {x}, {{"axes", Ints{0}}, {"starts", Ints{3}}, {"ends", Ints{1}}});
  EXPECT_EQ(empty[0].shape(), (Shape{0, 5}));
}

TEST(SliceTest, DecreaseAxisDropsDims) {
  const Tensor x = Iota({2, 3, 4});
  std::vector<Tensor> out = MustRun("slice", {x},
                                    {{"axes", Ints{1, 2}},
                                     {"starts", Ints{-1, 1}},
                                     {"ends", Ints{3, 3}},
                                     {"infer_flags", Ints{1, 1}},
                                     {"decrease_axis", Ints{1}}});
  EXPECT_EQ(out[0].shape(), (Shape{2, 2}));
  EXPECT_THAT(Values(out[0]), ElementsAre(9, 10, 21, 22));
  std::vector<Tensor> scalar = MustRun(
      "slice", {Iota({3})}, {{"axes", Ints{0}}, {"starts", Ints{2}}, {"ends", Ints{3}}, {"decrease_axis", Ints{0}}});
  EXPECT_EQ(scalar[0].shape(), Shape{});
  EXPECT_THAT(Values(scalar[0]), ElementsAre(2));
}

TEST(SliceTest, GradWritesIntoZeros) {
  const ir::AttributeMap attrs = {{"axes", Ints{1}}, {"starts", Ints{1}}, {"ends", Ints{3}}};
  std::vector<Tensor> dx = MustRun("slice_grad", {Iota({2, 4}), Literal({2, 2}, {1, 2, 3, 4})}, attrs);
  EXPECT_EQ(dx[0].shape(), (Shape{2, 4}));
  EXPECT_THAT(Values(dx[0]), ElementsAre(0, 1, 2, 0, 0, 3, 4, 0));
}

TEST(SliceTest, Errors) {
  const ir::TensorType x{{4, 5}, kF64};
  EXPECT_THAT(BuildError("slice", {x}, {{"axes", Ints{1}}, {"starts", Ints{0, 1}}, {"ends", Ints{2}}}),
              HasSubstr("axes, starts and ends must have one length"));
  EXPECT_THAT(
      BuildError("slice", {x}, {{"axes", Ints{1}}, {"starts", Ints{0}}, {"ends", Ints{2}}, {"decrease_axis", Ints{1}}}),
      HasSubstr("decrease_axis 1 must be a sliced axis of size 1, got size 2"));
  EXPECT_THAT(BuildError("slice", {x}, {{"axes", Ints{1, -1}}, {"starts", Ints{0, 0}}, {"ends", Ints{1, 1}}}),
              HasSubstr("axis -1 is named twice"));
  EXPECT_THAT(BuildError("slice", {x}, {{"axes", Ints{2}}, {"starts", Ints{0}}, {"ends", Ints{1}}}),
              HasSubstr("axis 2 out of range for rank 2"));
}

// --- gradients ---------------------------------------------------------------------------------

struct GradCase {
  std::string op;
  std::vector<Shape> inputs;
  ir::AttributeMap attrs;
  std::vector<int> loss_results = {};  // empty: every result
};

void PrintTo(const GradCase& c, std::ostream* os) {
  *os << c.op;
  for (const Shape& s : c.inputs) *os << " " << ir::ShapeToString(s);
}

class ShapeGradTest : public ::testing::TestWithParam<GradCase> {};

TEST_P(ShapeGradTest, MatchesFiniteDifferences) {
  const GradCase& c = GetParam();
  std::vector<GradInput> inputs;
  for (size_t i = 0; i < c.inputs.size(); ++i) inputs.push_back({RandomTensor({c.inputs[i], kF64}, 20 + i)});
  GradCheckOptions options;
  options.loss_results = c.loss_results;
  absl::Status s = CheckOpGradients(c.op, inputs, c.attrs, options);
  EXPECT_TRUE(s.ok()) << s;
}

INSTANTIATE_TEST_SUITE_P(
    Ops, ShapeGradTest,
    ::testing::Values(
        GradCase{"reshape", {{2, 3, 4}}, {{"shape", Ints{0, -1}}}},
        GradCase{"unsqueeze", {{2, 3}}, {{"axis", Ints{0, -1}}}}, GradCase{"squeeze", {{2, 1, 3}}, {{"axis", Ints{}}}},
        GradCase{"transpose", {{2, 3, 4}}, {{"perm", Ints{2, 0, 1}}}},
        GradCase{"split", {{2, 6}}, {{"sections", Ints{1, -1, 2}}, {"axis", int64_t{1}}}},
        // Only results 0 and 2 reach the loss: result 1's gradient is filled with zeros.
        GradCase{"split_with_num", {{6, 2}}, {{"num", int64_t{3}}, {"axis", int64_t{0}}}, {0, 2}},
        GradCase{"concat", {{2, 1}, {2, 3}, {2, 2}}, {{"axis", int64_t{-1}}}},
        GradCase{"slice",
                 {{3, 4, 5}},
                 {{"axes", Ints{0, 2}}, {"starts", Ints{1, -4}}, {"ends", Ints{2, 100}}, {"decrease_axis", Ints{0}}}}));

}  // namespace
}  // namespace pdist::testing
