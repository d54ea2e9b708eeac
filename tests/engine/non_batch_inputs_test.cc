// Data inputs that are not the batch (passes/batch_inputs.h): per-class weights f32[5] beside
// the samples x f32[8,16], and labels flattened to [batch·seq]. Data parallelism and micro-
// batching cut the batch's inputs and leave the others to completion, which replicates the
// weights and cuts the flattened labels through the loss; every layout trains as one rank does
// (float64, 1e-10). The weights were refused ("dim 0 (the batch, size 5) is not divisible by
// dp_degree 4") in the plan pdist-plan had picked, and the flattened labels were cut in the
// micro-batch program but fed whole ("feed 'labels' has type i64[64], the program expects i64[32]").
#include <gtest/gtest.h>

#include <cmath>

#include "absl/strings/str_cat.h"
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

// Offsets and scales broadcast over the batch, [1,16] each: three inputs of dim 0 = 1 outvoted
// the batch and made it 1.
constexpr char kBroadcastTables[] = R"pdir(
program {
  %x = data "x" : f64[4,16]
  %b = data "b" : f64[1,16]
  %s = data "s" : f64[1,16]
  %t = data "t" : f64[1,16]
  %w = param "w" : f64[16,5] {init = "normal(0.3)"}
  %labels = data "labels" : i64[4]
  %xb = add(%x, %b) : f64[4,16]
  %xs = multiply(%xb, %s) : f64[4,16]
  %xt = add(%xs, %t) : f64[4,16]
  %logits = matmul(%xt, %w) : f64[4,5]
  %l2 = reshape(%labels) {shape = [4, 1]} : i64[4,1]
  %soft, %each = cross_entropy_with_softmax(%logits, %l2) {axis = -1} : f64[4,5], f64[4,1]
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

TEST(NonBatchInputsTest, TheBatchIsDimZeroOfTheInputsOfTheHighestRank) {
  const ir::Program weights = Parse(kClassWeights);
  absl::StatusOr<passes::BatchInputs> found = passes::FindBatchInputs(weights);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->batch, 8);
  ASSERT_EQ(found->inputs.size(), 2u);
  EXPECT_EQ(found->inputs[0]->name(), "x");
  EXPECT_EQ(found->inputs[1]->name(), "labels");
  // Tokens [4,8] beside labels and a loss mask flattened to [32]: the tokens'.
  absl::StatusOr<ir::Program> flat = ir::ParseProgram(R"pdir(program {
  %tokens = data "tokens" : i64[4,8]
  %labels = data "labels" : i64[32]
  %mask = data "mask" : f64[32]
  %m = mean(%mask) : f64[]
  loss %m
})pdir");
  ASSERT_TRUE(flat.ok()) << flat.status();
  absl::StatusOr<passes::BatchInputs> tokens = passes::FindBatchInputs(*flat);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(tokens->batch, 4);
  ASSERT_EQ(tokens->inputs.size(), 1u);
  EXPECT_EQ(tokens->inputs[0]->name(), "tokens");
  // Tables broadcast over the batch ([1,16]) and per-feature vectors ([16]) are not the batch,
  // however many; a batch of one where every input has dim 0 = 1.
  for (const char* others : {"f64[1,16]", "f64[16]"}) {
    absl::StatusOr<ir::Program> p = ir::ParseProgram(absl::StrCat(R"pdir(program {
  %x = data "x" : f64[4,16]
  %b = data "b" : )pdir", others, R"pdir(
  %s = data "s" : )pdir", others, R"pdir(
  %t = data "t" : )pdir", others, R"pdir(
  %labels = data "labels" : i64[4]
  %m = mean(%x) : f64[]
  loss %m
})pdir"));
    ASSERT_TRUE(p.ok()) << p.status();
    absl::StatusOr<passes::BatchInputs> found = passes::FindBatchInputs(*p);
    ASSERT_TRUE(found.ok()) << found.status();
    EXPECT_EQ(found->batch, 4) << others;
    EXPECT_EQ(found->inputs.size(), 2u) << others;  // x, labels
  }
  absl::StatusOr<ir::Program> one = ir::ParseProgram(R"pdir(program {
  %x = data "x" : f64[1,16]
  %m = mean(%x) : f64[]
  loss %m
})pdir");
  ASSERT_TRUE(one.ok()) << one.status();
  absl::StatusOr<passes::BatchInputs> single = passes::FindBatchInputs(*one);
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_EQ(single->batch, 1);
}

TEST(NonBatchInputsTest, PerClassWeightsStayWholeUnderDataParallelismAndMicroBatches) {
  ExpectEveryLayoutTrainsAsOneRank(kClassWeights, 5,
                                   {R"({"dp_degree": 4})", R"({"dp_degree": 2, "gradient_merge": {"enable": true, "k_steps": 2}})"});
}

TEST(NonBatchInputsTest, TablesBroadcastOverTheBatchStayWhole) {
  ExpectEveryLayoutTrainsAsOneRank(kBroadcastTables, 5,
                                   {R"({"dp_degree": 2})", R"({"dp_degree": 2, "gradient_merge": {"enable": true, "k_steps": 2}})"});
}

TEST(NonBatchInputsTest, FlattenedLabelsAreCutWithTheBatch) {
  ExpectEveryLayoutTrainsAsOneRank(kFlatLabels, 16,
                                   {R"({"dp_degree": 2})", R"({"dp_degree": 2, "mp_degree": 2})",
                                    R"({"pp_degree": 2, "pipeline": {"accumulate_steps": 2}})",
                                    R"({"gradient_merge": {"enable": true, "k_steps": 2}})"});
}

}  // namespace
}  // namespace pdist::engine
