// MLP builder: shapes, names, counts and config errors.
#include "ir/models/mlp.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/models/model_stats.h"
#include "ir/verifier.h"
#include "tests/models/model_test_util.h"

namespace pdist::ir::models {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::CountOps;
using testing::Logits;
using testing::ParameterNames;

TEST(MlpTest, BuildsAVerifiedClassifier) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
    const MlpConfig c{.input = 16, .hidden = {32, 24}, .classes = 5, .batch = 8, .dtype = dtype};
    absl::StatusOr<Program> p = BuildMlp(c);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_TRUE(VerifyProgram(*p).ok()) << VerifyProgram(*p);
    EXPECT_EQ(p->FindArgument("x")->type(), (TensorType{{8, 16}, dtype}));
    EXPECT_EQ(p->FindArgument("labels")->type(), (TensorType{{8, 1}, DataType::kInt64}));
    EXPECT_EQ(Logits(*p)->type(), (TensorType{{8, 5}, dtype}));
    EXPECT_EQ(p->loss()->type(), (TensorType{{}, dtype}));
    EXPECT_THAT(ParameterNames(*p), ElementsAre("mlp.fc.0.weight", "mlp.fc.0.bias", "mlp.fc.1.weight", "mlp.fc.1.bias",
                                                "mlp.head.weight", "mlp.head.bias"));
    EXPECT_EQ(CountOps(*p, "relu"), 2);
    EXPECT_EQ(CountParameters(*p), 16 * 32 + 32 + 32 * 24 + 24 + 24 * 5 + 5);
    EXPECT_EQ(MlpParameterCount(c), CountParameters(*p));
    // He init for the relu layers: std sqrt(2 / 16).
    EXPECT_EQ(p->FindArgument("mlp.fc.0.weight")->init(), "normal(0.3535533905932738)");
  }
}

TEST(MlpTest, NoHiddenLayersIsLogisticRegression) {
  absl::StatusOr<Program> p = BuildMlp({.input = 4, .hidden = {}, .classes = 3, .batch = 2});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(ParameterNames(*p), ElementsAre("mlp.head.weight", "mlp.head.bias"));
  EXPECT_EQ(CountOps(*p, "relu"), 0);
}

TEST(MlpTest, BadConfigsNameTheField) {
  auto message = [](const MlpConfig& c) { return std::string(BuildMlp(c).status().message()); };
  EXPECT_THAT(message({.input = 0}), HasSubstr("MlpConfig.input must be in [1, 16777216], got 0"));
  EXPECT_THAT(message({.hidden = {8, -2}}), HasSubstr("MlpConfig.hidden[1] must be in [1, 16777216], got -2"));
  EXPECT_THAT(message({.classes = 0}), HasSubstr("MlpConfig.classes"));
  EXPECT_THAT(message({.dtype = DataType::kInt32}), HasSubstr("MlpConfig.dtype"));
  EXPECT_EQ(ValidateMlpConfig({.batch = -1}).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pdist::ir::models
