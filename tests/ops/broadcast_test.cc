// expand and where: values, shape inference errors, and gradients (built from other ops) against
// central differences.
#include <string>
#include <vector>

#include "executor/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/ops/op_test_helpers.h"
#include "tests/testing/op_testing.h"

namespace pdist::testing {
namespace {

using exec::Tensor;
using ir::DataType;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

Tensor Bools(const ir::Shape& shape, const std::vector<double>& values) { return Literal(shape, values, DataType::kBool); }

TEST(BroadcastTest, ExpandCopiesAlongNewAndSizeOneAxes) {
  const Tensor x = F64({2, 1}, {1, 2});
  const Tensor out = MustRun("expand", {x}, {{"shape", std::vector<int64_t>{2, 2, 3}}})[0];
  EXPECT_EQ(out.type().shape, (ir::Shape{2, 2, 3}));
  EXPECT_THAT(Values(out), ElementsAre(1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2));
  const Tensor ids = MustRun("expand", {Literal({1}, {7}, DataType::kInt64)}, {{"shape", std::vector<int64_t>{3}}})[0];
  EXPECT_THAT(Values(ids), ElementsAre(7, 7, 7));
  absl::StatusOr<std::vector<ir::TensorType>> bad =
      TryInfer("expand", {{{2, 3}, DataType::kFloat64}}, {{"shape", std::vector<int64_t>{2, 4}}});
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("x f64[2,3] does not broadcast to shape [2,4]"));
}

TEST(BroadcastTest, WhereChoosesByTheBroadcastCondition) {
  const Tensor c = Bools({2, 1}, {1, 0});
  const Tensor x = F64({2, 2}, {1, 2, 3, 4});
  const Tensor y = F64({}, {-9});
  EXPECT_THAT(Values(MustRun("where", {c, x, y})[0]), ElementsAre(1, 2, -9, -9));
  absl::StatusOr<std::vector<ir::TensorType>> bad =
      TryInfer("where", {{{2}, DataType::kFloat64}, {{2}, DataType::kFloat64}, {{2}, DataType::kFloat64}}, {});
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("condition must be bool"));
}

TEST(BroadcastTest, GradientsMatchFiniteDifferences) {
  const Tensor x = RandomTensor({{3, 1, 4}, DataType::kFloat64}, 41, -2.0, 2.0);
  EXPECT_TRUE(CheckOpGradients("expand", {{x}}, {{"shape", std::vector<int64_t>{2, 3, 5, 4}}}).ok());
  const Tensor c = Bools({3, 4}, {1, 0, 0, 1, 1, 1, 0, 0, 1, 0, 1, 0});
  const Tensor a = RandomTensor({{2, 3, 4}, DataType::kFloat64}, 43, -2.0, 2.0);
  const Tensor b = RandomTensor({{3, 1}, DataType::kFloat64}, 47, -2.0, 2.0);
  const absl::Status where = CheckOpGradients("where", {{c}, {a}, {b}}, {});
  EXPECT_TRUE(where.ok()) << where;
}

}  // namespace
}  // namespace pdist::testing

namespace pdist::testing {
namespace {

// The shapes of a masked attention score: a [t,t] condition, a scalar fill, [b,h,t,t] scores.
TEST(BroadcastTest, WhereOnAttentionShapes) {
  for (int64_t batch : {1, 2}) {
    std::vector<double> mask(64), scores(static_cast<size_t>(batch * 2 * 64));
    for (size_t i = 0; i < mask.size(); ++i) mask[i] = (i % 8) > (i / 8) ? 1 : 0;
    for (size_t i = 0; i < scores.size(); ++i) scores[i] = static_cast<double>(i);
    const Tensor out = MustRun("where", {Literal({8, 8}, mask, DataType::kBool), Literal({}, {-1}, DataType::kFloat32),
                                         Literal({batch, 2, 8, 8}, scores, DataType::kFloat32)})[0];
    for (size_t i = 0; i < scores.size(); ++i) {
      ASSERT_EQ(out.At(static_cast<int64_t>(i)), mask[i % 64] != 0 ? -1 : scores[i]) << "batch " << batch << " element " << i;
    }
  }
}

}  // namespace
}  // namespace pdist::testing
