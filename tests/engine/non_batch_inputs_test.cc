// Data inputs that are not the batch (passes/batch_inputs.h): per-class weights f32[5] beside
// the samples x f32[8,16], and labels flattened to [batch·seq]. Data parallelism and micro-
// batching cut the batch's inputs and leave the others to completion, which replicates the
// weights and cuts the flattened labels through the loss; every layout trains as one rank does
// (float64, 1e-10). The weights were refused ("dim 0 (the batch, size 5) is not divisible by
// dp_degree 4") in the plan pdist-plan had picked, and the flattened labels were cut in the
// micro-batch program but fed whole ("feed 'labels' has type i64[64], the program expects i64[32]").
#include <gtest/gtest.h>

#include <cmath>

#include "engine/engine.h"
#include "ir/parser.h"
#include "passes/batch_inputs.h"
#include "tests/engine/distributed_test_util.h"

namespace pdist::engine {
namespace {

constexpr char kClassWeights[] = R"pdir(
program {
  %x = data "x" : f64[8,16]
  %cw = data "cw" : f64[5]
  %w = param "w" : f64[16,5] {init = "normal(0.3)"}
  %labels = data "labels" : i64[8]
  %logits = matmul(%x, %w) : f64[8,5]
  %weighted = multiply(%logits, %cw) : f64[8,5]
  %l2 = reshape(%labels) {shape = [8, 1]} : i64[8,1]
  %soft, %each = cross_entropy_with_softmax(%weighted, %l2) {axis = -1} : f64[8,5], f64[8,1]
  %loss = mean(%each) : f64[]
  loss %loss
}
)pdir";

constexpr char kFlatLabels[] = R"pdir(
program {
  %tokens = data "tokens" : i64[4,8]
  %wte = param "wte" : f64[16,8] {init = "normal(0.3)"}
  %w = param "w" : f64[8,16] {init = "normal(0.3)"}
  %labels = data "labels" : i64[32]
  %h = embedding(%tokens, %wte) : f64[4,8,8]
  %logits = matmul(%h, %w) : f64[4,8,16]
  %flat = reshape(%logits) {shape = [32, 16]} : f64[32,16]
  %l2 = reshape(%labels) {shape = [32, 1]} : i64[32,1]
  %soft, %each = cross_entropy_with_softmax(%flat, %l2) {axis = -1} : f64[32,16], f64[32,1]
  %loss = mean(%each) : f64[]
  loss %loss
}
)pdir";

ir::Program Parse(const char* text) {
  absl::StatusOr<ir::Program> p = ir::ParseProgram(text);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? std::move(*p) : ir::Program();
}

// A batch of every data input: indices below `classes`, reals from a sine.
exec::Feeds Batch(const ir::Program& model, int64_t step, int64_t classes) {
  exec::Feeds feeds;
  for (const ir::Value* v : model.block().arguments()) {
    if (v->role() != ir::ValueRole::kDataInput) continue;
    std::vector<double> values;
    for (int64_t i = 0; i < v->type().num_elements(); ++i) {
      values.push_back(v->type().dtype == ir::DataType::kInt64 ? static_cast<double>((7 * i + 3 * step) % classes)
                                                               : std::sin(0.37 * static_cast<double>(i + 11 * step)));
    }
    feeds[v->name()] = exec::TensorFromDoubles(v->type(), values);
  }
  return feeds;
}

void ExpectEveryLayoutTrainsAsOneRank(const char* text, int64_t classes, const std::vector<std::string>& strategies) {
  const ir::Program model = Parse(text);
  auto batch = [&](int64_t s) { return Batch(model, s, classes); };
  const testing::RunOutcome one = testing::TrainOn(model.Clone(), testing::EquivalenceOptions(), 3, batch);
  ASSERT_EQ(one.losses.size(), 3u);
  for (const std::string& strategy : strategies) {
    SCOPED_TRACE(strategy);
    EngineOptions o = testing::EquivalenceOptions();
    o.strategy_json = strategy;
    const testing::RunOutcome got = testing::TrainOn(model.Clone(), o, 3, batch);
    testing::ExpectSameTraining(got, one, model, 1e-10);
  }
}

TEST(NonBatchInputsTest, TheBatchIsTheDimZeroMostDataInputsShare) {
  const ir::Program weights = Parse(kClassWeights);
  absl::StatusOr<passes::BatchInputs> found = passes::FindBatchInputs(weights);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->batch, 8);
  ASSERT_EQ(found->inputs.size(), 2u);
  EXPECT_EQ(found->inputs[0]->name(), "x");
  EXPECT_EQ(found->inputs[1]->name(), "labels");
  // A tie (tokens [4,8] and labels [32]): the first input's.
  absl::StatusOr<passes::BatchInputs> flat = passes::FindBatchInputs(Parse(kFlatLabels));
  ASSERT_TRUE(flat.ok()) << flat.status();
  EXPECT_EQ(flat->batch, 4);
  ASSERT_EQ(flat->inputs.size(), 1u);
  EXPECT_EQ(flat->inputs[0]->name(), "tokens");
}

TEST(NonBatchInputsTest, PerClassWeightsStayWholeUnderDataParallelismAndMicroBatches) {
  ExpectEveryLayoutTrainsAsOneRank(kClassWeights, 5,
                                   {R"({"dp_degree": 4})", R"({"dp_degree": 2, "gradient_merge": {"enable": true, "k_steps": 2}})"});
}

TEST(NonBatchInputsTest, FlattenedLabelsAreCutWithTheBatch) {
  ExpectEveryLayoutTrainsAsOneRank(kFlatLabels, 16,
                                   {R"({"dp_degree": 2})", R"({"dp_degree": 2, "mp_degree": 2})",
                                    R"({"pp_degree": 2, "pipeline": {"accumulate_steps": 2}})",
                                    R"({"gradient_merge": {"enable": true, "k_steps": 2}})"});
}

}  // namespace
}  // namespace pdist::engine
