// Batches checked before the step (engine/feed_checks.h): an index out of range is refused on
// one rank and under vocab parallelism alike — where each rank's piece of the table and of the
// logits masked it, and the step trained on it silently — and the engine goes on after it.
#include "engine/feed_checks.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/engine.h"
#include "ir/parser.h"
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
                                       "embedding reads it as an index into dim 0 of f32[64,32] (0 to 63): "},
      {"tokens", -1, "batch input 'tokens' holds -1 at flat index 5 of i64[4,8], out of range: "
                     "embedding reads it as an index into dim 0 of f32[64,32] (0 to 63): "},
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
      EXPECT_THAT(std::string(trained.status().message()),
                  HasSubstr(c.error + (c.input == "tokens" ? "not trained on (the parameters are as they were)" : "")));
      EXPECT_THAT(std::string(evaluated.status().message()), HasSubstr(c.error));
      auto predicted = (*engine)->Predict(bad);
      if (c.input == "tokens") {
        EXPECT_THAT(std::string(predicted.status().message()), HasSubstr(c.error + "nothing predicted"));
      } else {
        EXPECT_TRUE(predicted.ok()) << predicted.status();  // prediction reads no labels
      }
    }
    // Nothing ran on a refused batch: the communicators are whole and the parameters are those
    // of one step on the ignore_index batch alone, bit for bit.
    EXPECT_EQ((*engine)->step(), 1);
    auto reference = Engine::Create(model.Clone(), o);
    ASSERT_TRUE(reference.ok()) << reference.status();
    exec::Feeds ignored = good;
    ignored["labels"] = good.at("labels").Clone();
    ignored["labels"].data<int64_t>()[5] = -100;
    ASSERT_TRUE((*reference)->TrainStep(ignored).ok());
    absl::StatusOr<double> after = (*engine)->EvalStep(good);
    absl::StatusOr<double> want = (*reference)->EvalStep(good);
    ASSERT_TRUE(after.ok()) << after.status();
    ASSERT_TRUE(want.ok()) << want.status();
    EXPECT_EQ(*after, *want);
    EXPECT_NE(*after, *before);
  }
}

// A batch of another shape is named with the whole batch's type under every strategy: a rank's
// piece was refused by the slicer in the words of placements ("dims_mapping [0] does not fit
// shape [4,16]"), one rank by the executor as here.
TEST(FeedChecksTest, AFeedOfAnotherTypeIsNamedAsOneRankNamesIt) {
  const ir::Program model = *ir::models::BuildGpt(
      testing::SmallConfig<ir::models::GptConfig>(ir::DataType::kFloat32, /*layers=*/2, /*batch=*/4));
  exec::Feeds bad = testing::RandomTokenBatch(model, 0, testing::kSmallVocab);
  bad["labels"] = exec::Tensor::Empty({{32}, ir::DataType::kInt64});  // flattened: 4·8
  for (const char* strategy : {"", R"({"dp_degree": 2})", R"({"pp_degree": 2, "pipeline": {"accumulate_steps": 2}})"}) {
    SCOPED_TRACE(strategy);
    EngineOptions o = testing::EquivalenceOptions();
    o.strategy_json = strategy;
    auto engine = Engine::Create(model.Clone(), o);
    ASSERT_TRUE(engine.ok()) << engine.status();
    EXPECT_THAT(std::string((*engine)->TrainStep(bad).status().message()),
                HasSubstr("feed 'labels' has type i64[32], the program expects i64[4,8]"));
  }
}

// gather counts negative indices from the end (as ONNX and numpy do): -4 … 3 index 4 rows, and
// the check takes what the kernel takes — int32 indices too.
TEST(FeedChecksTest, GatherIndicesMayCountFromTheEnd) {
  for (const char* dtype : {"i64", "i32"}) {
    absl::StatusOr<ir::Program> program = ir::ParseProgram(absl::StrCat(R"ir(program {
  %x = data "x" : f32[4,3]
  %i = data "i" : )ir", dtype, R"ir([2]
  %w = param "w" : f32[3,2] {init = "normal(0.1)"}
  %g = gather(%x, %i) {axis = 0} : f32[2,3]
  %y = matmul(%g, %w) : f32[2,2]
  %l = mean(%y) : f32[]
  loss %l
})ir"));
    ASSERT_TRUE(program.ok()) << program.status();
    auto engine = Engine::Create(*std::move(program), {});
    ASSERT_TRUE(engine.ok()) << engine.status();
    exec::Tensor x = exec::Tensor::Zeros({{4, 3}, ir::DataType::kFloat32});
    for (int64_t k = 0; k < 12; ++k) x.data<float>()[k] = static_cast<float>(k);
    auto indices = [&](int64_t a, int64_t b) {
      exec::Tensor t = exec::Tensor::Zeros({{2}, dtype == std::string("i64") ? ir::DataType::kInt64 : ir::DataType::kInt32});
      if (t.dtype() == ir::DataType::kInt64) {
        t.data<int64_t>()[0] = a, t.data<int64_t>()[1] = b;
      } else {
        t.data<int32_t>()[0] = static_cast<int32_t>(a), t.data<int32_t>()[1] = static_cast<int32_t>(b);
      }
      return exec::Feeds{{"x", x}, {"i", t}};
    };
    absl::StatusOr<double> from_end = (*engine)->EvalStep(indices(-1, 0));
    absl::StatusOr<double> from_start = (*engine)->EvalStep(indices(3, 0));
    ASSERT_TRUE(from_end.ok()) << from_end.status();
    ASSERT_TRUE(from_start.ok()) << from_start.status();
    EXPECT_EQ(*from_end, *from_start);
    for (int64_t bad : {-5, 4}) {
      absl::StatusOr<double> refused = (*engine)->EvalStep(indices(bad, 0));
      EXPECT_THAT(std::string(refused.status().message()),
                  HasSubstr(absl::StrCat("batch input 'i' holds ", bad, " at flat index 0 of ", dtype,
                                         "[2], out of range: gather reads it as an index into dim 0 of f32[4,3] (-4 to 3)")));
    }
  }
}

}  // namespace
}  // namespace pdist::engine
