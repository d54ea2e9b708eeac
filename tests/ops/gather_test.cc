// gather and gather_grad: values (negative indices included), the errors, and the gradient
// against central differences.
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

Tensor Ids(const ir::Shape& shape, const std::vector<double>& values) { return Literal(shape, values, DataType::kInt64); }

TEST(GatherTest, PicksSlicesAlongTheAxis) {
  const Tensor x = F64({2, 3}, {0, 1, 2, 10, 11, 12});
  const Tensor cols = MustRun("gather", {x, Ids({2, 2}, {2, 0, -1, 1})}, {{"axis", int64_t{1}}})[0];
  EXPECT_EQ(cols.type().shape, (ir::Shape{2, 2, 2}));
  EXPECT_THAT(Values(cols), ElementsAre(2, 0, 2, 1, 12, 10, 12, 11));
  const Tensor rows = MustRun("gather", {x, Ids({}, {1})}, {})[0];
  EXPECT_EQ(rows.type().shape, (ir::Shape{3}));
  EXPECT_THAT(Values(rows), ElementsAre(10, 11, 12));
}

TEST(GatherTest, GradAddsRepeatedPicksAndErrorsNameTheIndex) {
  const Tensor g = F64({2, 2}, {1, 2, 3, 4});
  const Tensor dx = MustRun("gather_grad", {Ids({2}, {1, 1}), g}, {{"axis", int64_t{1}}, {"x_shape", std::vector<int64_t>{2, 3}}})[0];
  EXPECT_THAT(Values(dx), ElementsAre(0, 3, 0, 0, 7, 0));
  absl::StatusOr<std::vector<Tensor>> bad = RunOp("gather", {F64({3}, {1, 2, 3}), Ids({1}, {3})}, {});
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("gather: index 3 (element 0) is out of range for an axis of 3 (valid: -3 to 2)"));
  EXPECT_THAT(BuildError("gather", {{{3}, DataType::kFloat64}, {{1}, DataType::kFloat32}}), HasSubstr("index must be i32 or i64"));
}

TEST(GatherTest, GradientMatchesFiniteDifferences) {
  const Tensor x = RandomTensor({{3, 4, 2}, DataType::kFloat64}, 53, -2.0, 2.0);
  const absl::Status s = CheckOpGradients("gather", {{x}, {Ids({2, 3}, {0, 3, 3, -1, 1, 0})}}, {{"axis", int64_t{1}}});
  EXPECT_TRUE(s.ok()) << s;
}

}  // namespace
}  // namespace pdist::testing
