// Engine::Predict: the model's outputs, whole, dropout off. Every strategy's predictions are
// compared with one rank's in the equivalence suites (tests/engine/distributed_test_util.h's
// TrainOn); here: what the outputs are, and the errors.
#include <cmath>

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "absl/strings/str_cat.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/serialize.h"
#include "tests/engine/distributed_test_util.h"

namespace pdist::engine {
namespace {

ir::Program SmallGpt(double dropout) {
  auto cfg = testing::SmallConfig<ir::models::GptConfig>(ir::DataType::kFloat64, /*layers=*/2, /*batch=*/4);
  cfg.dropout = dropout;
  return *ir::models::BuildGpt(cfg);
}

// mean over positions of −log softmax(logits)[label], from the predicted logits by hand.
double CrossEntropy(const exec::Tensor& logits, const exec::Tensor& labels) {
  const int64_t vocab = logits.shape().back();
  const int64_t rows = logits.num_elements() / vocab;
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double max = -INFINITY;
    for (int64_t v = 0; v < vocab; ++v) max = std::max(max, logits.At(r * vocab + v));
    double sum = 0;
    for (int64_t v = 0; v < vocab; ++v) sum += std::exp(logits.At(r * vocab + v) - max);
    total += std::log(sum) + max - logits.At(r * vocab + static_cast<int64_t>(labels.At(r)));
  }
  return total / static_cast<double>(rows);
}

// The logits Predict returns are the ones evaluation's loss is computed from: their cross
// entropy, by hand, is EvalStep's loss (both with dropout off), on one rank and on dp2 × mp2.
TEST(PredictTest, LogitsAreWhatTheEvaluationLossReads) {
  for (const char* strategy : {"", R"({"dp_degree": 2, "mp_degree": 2})"}) {
    EngineOptions o = testing::EquivalenceOptions();
    o.strategy_json = strategy;
    const ir::Program model = SmallGpt(/*dropout=*/0.2);
    auto engine = Engine::Create(model.Clone(), o);
    ASSERT_TRUE(engine.ok()) << engine.status();
    const exec::Feeds batch = testing::RandomTokenBatch(model, 0, testing::kSmallVocab);
    auto loss = (*engine)->EvalStep(batch);
    ASSERT_TRUE(loss.ok()) << loss.status();
    auto outputs = (*engine)->Predict({{"tokens", batch.at("tokens")}});  // no labels needed
    ASSERT_TRUE(outputs.ok()) << outputs.status();
    ASSERT_EQ(outputs->size(), 1u);
    const exec::Tensor& logits = outputs->at("logits");
    EXPECT_EQ(logits.type(), model.outputs().front().value->type()) << strategy;  // whole, not a piece
    EXPECT_NEAR(CrossEntropy(logits, batch.at("labels")), *loss, 1e-10 * *loss) << strategy;
  }
}

// Dropout is off in prediction: a model with dropout predicts what the same weights without
// dropout predict, bit for bit, every time.
TEST(PredictTest, DropoutIsOff) {
  EngineOptions o = testing::EquivalenceOptions();
  auto with = Engine::Create(SmallGpt(0.5), o);
  auto without = Engine::Create(SmallGpt(0.0), o);
  ASSERT_TRUE(with.ok() && without.ok());
  const exec::Feeds batch = testing::RandomTokenBatch(SmallGpt(0.0), 1, testing::kSmallVocab);
  auto a = (*with)->Predict(batch);
  auto b = (*with)->Predict(batch);
  auto c = (*without)->Predict(batch);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok()) << a.status() << b.status() << c.status();
  EXPECT_EQ(testing::RelativeNormDistance(a->at("logits"), c->at("logits")), 0);
  EXPECT_EQ(testing::RelativeNormDistance(a->at("logits"), b->at("logits")), 0);
}

TEST(PredictTest, AProgramWithoutOutputsIsAnErrorThatSaysHowToMarkThem) {
  auto program = ir::ParseProgram(R"IR(program {
    %0 = data "x" : f32[2,3]
    %1 = param "w" : f32[3,3] {init = "normal(0.02)"}
    %2 = matmul(%0, %1) {trans_x = false, trans_y = false} : f32[2,3]
    %3 = mean(%2) : f32[]
    loss %3
  })IR");
  ASSERT_TRUE(program.ok()) << program.status();
  auto engine = Engine::Create(std::move(*program), {});
  ASSERT_TRUE(engine.ok()) << engine.status();
  auto outputs = (*engine)->Predict({{"x", exec::Tensor::Empty({{2, 3}, ir::DataType::kFloat32})}});
  ASSERT_FALSE(outputs.ok());
  EXPECT_EQ(outputs.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(outputs.status().message().find("output \"logits\""), std::string::npos) << outputs.status();
}

TEST(PredictTest, AMissingInputIsNamed) {
  auto engine = Engine::Create(SmallGpt(0.0), testing::EquivalenceOptions());
  ASSERT_TRUE(engine.ok()) << engine.status();
  auto outputs = (*engine)->Predict({});
  ASSERT_FALSE(outputs.ok());
  EXPECT_NE(outputs.status().message().find("tokens"), std::string::npos) << outputs.status();
}

// Outputs are part of the program: printed, parsed, saved and loaded.
TEST(PredictTest, OutputsRoundTripThroughTextAndModelPb) {
  const ir::Program model = SmallGpt(0.0);
  ASSERT_EQ(model.outputs().size(), 1u);
  const std::string text = ir::PrintProgram(model);
  EXPECT_NE(text.find("output \"logits\" %"), std::string::npos);
  auto parsed = ir::ParseProgram(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->outputs().size(), 1u);
  EXPECT_EQ(parsed->outputs()[0].name, "logits");
  EXPECT_EQ(parsed->outputs()[0].value->id(), model.outputs()[0].value->id());
  auto bytes = ir::SerializeProgram(model);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto loaded = ir::DeserializeProgram(*bytes);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(ir::PrintProgram(*loaded), text);
  const std::string duplicated = absl::StrCat(text.substr(0, text.rfind('}')), "  output \"logits\" %0\n}\n");
  auto rejected = ir::ParseProgram(duplicated);
  ASSERT_FALSE(rejected.ok());
  EXPECT_NE(rejected.status().message().find("output \"logits\" is given twice"), std::string::npos) << rejected.status();
}

}  // namespace
}  // namespace pdist::engine
