// Batches checked before the step (engine/feed_checks.h): an index out of range is refused on
// one rank and under vocab parallelism alike — where each rank's piece of the table and of the
// logits masked it, and the step trained on it silently — and the engine goes on after it.
#include "engine/feed_checks.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/engine.h"
#include "tests/engine/distributed_test_util.h"

namespace pdist::engine {
namespace {

using ::testing::HasSubstr;

TEST(FeedChecksTest, AnIndexOutOfTheWholeVocabularyIsRefusedUnderEveryStrategy) {
  const ir::Program model = *ir::models::BuildGpt(
      testing::SmallConfig<ir::models::GptConfig>(ir::DataType::kFloat32, /*layers=*/2, /*batch=*/4));
  struct Case {
    std::string input;
    int64_t value;
    std::string error;  // empty: accepted
  };
  const std::vector<Case> cases = {
      {"tokens", testing::kSmallVocab, "batch input 'tokens' holds 64 at flat index 5 of i64[4,8], out of range: "
                                       "embedding reads it as an index into dim 0 of f32[64,32] (0 to 63): not "
                                       "trained on (the parameters are as they were)"},
      {"tokens", -1, "batch input 'tokens' holds -1 at flat index 5"},
      {"labels", 999, "batch input 'labels' holds 999 at flat index 5 of i64[4,8], out of range: "
                      "cross_entropy_with_softmax reads it as an index into dim 2 of f32[4,8,64] (0 to 63, or -100)"},
      {"labels", -100, ""},  // ignore_index: a position without a label
  };
  for (const char* strategy : {"", R"({"mp_degree": 2})", R"({"dp_degree": 2, "mp_degree": 2, "sp": true})"}) {
    EngineOptions o = testing::EquivalenceOptions();
    o.strategy_json = strategy;
    auto engine = Engine::Create(model.Clone(), o);
    ASSERT_TRUE(engine.ok()) << engine.status();
    const exec::Feeds good = testing::RandomTokenBatch(model, 0, testing::kSmallVocab);
    absl::StatusOr<double> before = (*engine)->EvalStep(good);
    ASSERT_TRUE(before.ok()) << before.status();
    for (const Case& c : cases) {
      SCOPED_TRACE(absl::StrCat(strategy, " ", c.input, " = ", c.value));
      exec::Feeds bad = good;
      bad[c.input] = good.at(c.input).Clone();
      bad[c.input].data<int64_t>()[5] = c.value;
      absl::StatusOr<StepResult> trained = (*engine)->TrainStep(bad);
      absl::StatusOr<double> evaluated = (*engine)->EvalStep(bad);
      if (c.error.empty()) {
        EXPECT_TRUE(trained.ok()) << trained.status();
        EXPECT_TRUE(evaluated.ok()) << evaluated.status();
        continue;
      }
      EXPECT_THAT(std::string(trained.status().message()), HasSubstr(c.error));
      EXPECT_THAT(std::string(evaluated.status().message()), HasSubstr(c.error));
      if (c.input == "tokens") {
        auto predicted = (*engine)->Predict({{"tokens", bad.at("tokens")}});
        EXPECT_THAT(std::string(predicted.status().message()), HasSubstr(c.error));
      }
    }
    // Nothing ran on a refused batch: the communicators are whole and the parameters as they
    // were but for the one step on ignore_index labels.
    EXPECT_EQ((*engine)->step(), 1);
    absl::StatusOr<double> after = (*engine)->EvalStep(good);
    ASSERT_TRUE(after.ok()) << after.status();
    EXPECT_NE(*after, *before);
  }
}

}  // namespace
}  // namespace pdist::engine
