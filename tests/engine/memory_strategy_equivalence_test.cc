// The strategies that trade communication or compute for memory train exactly as one rank does:
// ZeRO stages 1, 2, 3 (with dp, dp × mp + sp, pp × dp; over all of dp or, hybrid, over pairs of
// its ranks; stages 2 and 3 also summing each micro-batch's reduce-scattered shards,
// sharding.accumulate_shards), gradient merge and recompute (full and selective, with dropout,
// alone and with the others), 10 AdamW steps, float32 (1e-5) and float64 (1e-10), losses, every parameter and every
// optimizer state.
#include <algorithm>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/engine/distributed_test_util.h"

namespace pdist::engine {
namespace {

using testing::ExpectSameTraining;
using testing::RunOutcome;
using testing::TrainSteps;

constexpr int64_t kSteps = 10;
constexpr int64_t kLayers = 2;
constexpr int64_t kBatch = 8;  // 4 micro-batches of 2 under gradient merge or pp, each over dp 2

struct Case {
  std::string name;
  std::string model;  // gpt | gpt_dropout | llama
  std::string strategy;
  ir::DataType dtype;
};

ir::Program BuildModel(const std::string& model, ir::DataType dtype) {
  if (model != "gpt_dropout") return testing::BuildSmallModel(model, dtype, kLayers, kBatch);
  auto cfg = testing::SmallConfig<ir::models::GptConfig>(dtype, kLayers, kBatch);
  cfg.dropout = 0.1;
  return *ir::models::BuildGpt(cfg);
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) { return info.param.name; }
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

// Optimizer states too: under ZeRO they live in slices on different ranks.
void ExpectSameStates(const RunOutcome& got, const RunOutcome& want, double tol) {
  int64_t compared = 0;
  for (const auto& [name, tensor] : want.state) {
    if (name.find(".moment") == std::string::npos) continue;
    auto g = got.state.find(name);
    ASSERT_NE(g, got.state.end()) << name;
    // Moments of the key bias carry float32 rounding noise (see KeyBiasElements).
    if (tensor.dtype() == ir::DataType::kFloat32 && name.find("qkv.bias") != std::string::npos) continue;
    EXPECT_LE(testing::RelativeNormDistance(g->second, tensor), tol) << "state " << name;
    ++compared;
  }
  EXPECT_GT(compared, 0);
}

class MemoryStrategyEquivalenceTest : public ::testing::TestWithParam<Case> {};

TEST_P(MemoryStrategyEquivalenceTest, MatchesSingleRank) {
  const Case& c = GetParam();
  const ir::Program model = BuildModel(c.model, c.dtype);
  const RunOutcome single = TrainSteps(model.Clone(), testing::EquivalenceOptions(), kSteps, testing::kSmallVocab);
  EngineOptions o = testing::EquivalenceOptions();
  o.strategy_json = c.strategy;
  const RunOutcome run = TrainSteps(model.Clone(), o, kSteps, testing::kSmallVocab);
  const bool f64 = c.dtype == ir::DataType::kFloat64;
  const double tol = f64 ? 1e-10 : 1e-5;
  ExpectSameTraining(run, single, model, tol,
                     f64 || c.model == "llama" ? testing::ElementMask{} : testing::KeyBiasElements(model, testing::kSmallHeads));
  ExpectSameStates(run, single, tol);
}

std::string Zero(int64_t stage, const std::string& degrees) {
  return absl::StrCat(R"({)", degrees, R"(, "sharding": {"enable": true, "stage": )", stage, "}}");
}

std::string HybridZero(int64_t stage, const std::string& degrees) {
  return absl::StrCat(R"({)", degrees, R"(, "sharding": {"enable": true, "degree": 2, "stage": )", stage, "}}");
}

// sharding.accumulate_shards: every micro-batch's gradients reduce-scattered in its backward, the
// shards summed over the micro-batches.
std::string ZeroShards(int64_t stage, const std::string& degrees, int64_t shard_degree = 0) {
  return absl::StrCat(R"({)", degrees, R"(, "sharding": {"enable": true, "accumulate_shards": true, "stage": )", stage,
                      shard_degree > 0 ? absl::StrCat(R"(, "degree": )", shard_degree) : "", "}}");
}

std::vector<Case> Cases() {
  struct Strategy {
    std::string name, json;
  };
  std::vector<Strategy> strategies = {
      {"merge2", R"({"gradient_merge": {"enable": true, "k_steps": 2}})"},
      {"merge4", R"({"gradient_merge": {"enable": true, "k_steps": 4}})"},
      {"merge2_dp2", R"({"dp_degree": 2, "gradient_merge": {"enable": true, "k_steps": 2}})"},
  };
  for (int64_t stage : {1, 2, 3}) {
    const std::string z = absl::StrCat("zero", stage, "_");
    strategies.push_back({z + "dp2", Zero(stage, R"("dp_degree": 2)")});
    strategies.push_back({z + "dp4", Zero(stage, R"("dp_degree": 4)")});
    strategies.push_back({z + "dp2_mp2_sp", Zero(stage, R"("dp_degree": 2, "mp_degree": 2, "sp": true)")});
    strategies.push_back(
        {z + "pp2_dp2", Zero(stage, R"("dp_degree": 2, "pp_degree": 2, "pipeline": {"accumulate_steps": 2})")});
    // Hybrid: states sharded over pairs of the 4 data-parallel ranks, replicated across the pairs.
    strategies.push_back({z + "dp4_shard2", HybridZero(stage, R"("dp_degree": 4)")});
  }
  for (const char* granularity : {"full", "selective"}) {
    const std::string rc = absl::StrCat(R"("recompute": {"enable": true, "granularity": ")", granularity, R"("})");
    const std::string r = absl::StrCat("rc_", granularity);
    strategies.push_back({r, absl::StrCat("{", rc, "}")});
    strategies.push_back({r + "_dp2_mp2_sp", absl::StrCat(R"({"dp_degree": 2, "mp_degree": 2, "sp": true, )", rc, "}")});
    strategies.push_back({r + "_pp2", absl::StrCat(R"({"pp_degree": 2, "pipeline": {"accumulate_steps": 4}, )", rc, "}")});
    strategies.push_back(
        {r + "_pp2_zbh1", absl::StrCat(R"({"pp_degree": 2, "pipeline": {"schedule_mode": "ZBH1", "accumulate_steps": 4}, )", rc, "}")});
    strategies.push_back({r + "_zero3_dp2", absl::StrCat(R"({"dp_degree": 2, "sharding": {"enable": true, "stage": 3}, )", rc, "}")});
  }
  strategies.push_back({"zero3_dp2_merge2",
                        R"({"dp_degree": 2, "sharding": {"enable": true, "stage": 3}, "gradient_merge": {"enable": true, "k_steps": 2}})"});
  for (int64_t stage : {2, 3}) {
    const std::string z = absl::StrCat("zero", stage, "_shards_");
    strategies.push_back({z + "dp2_merge2", ZeroShards(stage, R"("dp_degree": 2, "gradient_merge": {"enable": true, "k_steps": 2})")});
    strategies.push_back({z + "dp2_mp2_sp_merge2",
                          ZeroShards(stage, R"("dp_degree": 2, "mp_degree": 2, "sp": true, "gradient_merge": {"enable": true, "k_steps": 2})")});
    strategies.push_back(
        {z + "pp2_dp2", ZeroShards(stage, R"("dp_degree": 2, "pp_degree": 2, "pipeline": {"accumulate_steps": 4})")});
    strategies.push_back({z + "pp2_zbh1_dp2",
                          ZeroShards(stage, R"("dp_degree": 2, "pp_degree": 2, "pipeline": {"schedule_mode": "ZBH1", "accumulate_steps": 4})")});
    strategies.push_back(
        {z + "dp4_shard2_merge2", ZeroShards(stage, R"("dp_degree": 4, "gradient_merge": {"enable": true, "k_steps": 2})", 2)});
  }
  std::vector<Case> cases;
  for (const auto& [name, json] : strategies) {
    cases.push_back({"gpt_" + name + "_f64", "gpt", json, ir::DataType::kFloat64});
    cases.push_back({"gpt_" + name + "_f32", "gpt", json, ir::DataType::kFloat32});
  }
  for (const char* granularity : {"full", "selective"}) {
    const std::string rc = absl::StrCat(R"("recompute": {"enable": true, "granularity": ")", granularity, R"("})");
    cases.push_back({absl::StrCat("gpt_dropout_rc_", granularity, "_dp2_mp2_f64"), "gpt_dropout",
                     absl::StrCat(R"({"dp_degree": 2, "mp_degree": 2, )", rc, "}"), ir::DataType::kFloat64});
    cases.push_back({absl::StrCat("gpt_dropout_rc_", granularity, "_pp2_f32"), "gpt_dropout",
                     absl::StrCat(R"({"pp_degree": 2, "pipeline": {"accumulate_steps": 4}, )", rc, "}"), ir::DataType::kFloat32});
    cases.push_back({absl::StrCat("llama_rc_", granularity, "_mp2_f64"), "llama",
                     absl::StrCat(R"({"mp_degree": 2, )", rc, "}"), ir::DataType::kFloat64});
  }
  cases.push_back({"llama_zero3_dp2_mp2_f32", "llama", Zero(3, R"("dp_degree": 2, "mp_degree": 2)"), ir::DataType::kFloat32});
  cases.push_back({"gpt_zero3_dp4_shard2_mp2_sp_f32", "gpt", HybridZero(3, R"("dp_degree": 4, "mp_degree": 2, "sp": true)"),
                   ir::DataType::kFloat32});
  cases.push_back({"gpt_zero2_dp4_shard2_pp2_f64", "gpt",
                   HybridZero(2, R"("dp_degree": 4, "pp_degree": 2, "pipeline": {"accumulate_steps": 2})"),
                   ir::DataType::kFloat64});
  cases.push_back({"llama_zero2_pp2_dp2_f64", "llama",
                   Zero(2, R"("dp_degree": 2, "pp_degree": 2, "pipeline": {"accumulate_steps": 2})"), ir::DataType::kFloat64});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Strategies, MemoryStrategyEquivalenceTest, ::testing::ValuesIn(Cases()), CaseName);

// Replayed ops compute the same bits as the originals: on one rank in float64, recompute changes
// no loss and no parameter at all, with dropout on. And it is not a no-op: the activations that
// live at once shrink (full below selective below none). Sequences of 32 make the activations,
// not the weight gradients that all live at the end of the backward, the peak.
TEST(RecomputeTest, ReplaysBitForBitAndHoldsFewerActivations) {
  auto cfg = testing::SmallConfig<ir::models::GptConfig>(ir::DataType::kFloat64, /*layers=*/4, kBatch);
  cfg.seq_len = 32;
  cfg.dropout = 0.1;
  const ir::Program model = *ir::models::BuildGpt(cfg);
  struct Run {
    RunOutcome outcome;
    int64_t peak_bytes = 0, activation_peak = 0, gradient_peak = 0;
  };
  auto run = [&](const std::string& strategy) {
    EngineOptions o = testing::EquivalenceOptions();
    o.strategy_json = strategy;
    auto engine = Engine::Create(model.Clone(), o);
    EXPECT_TRUE(engine.ok()) << engine.status();
    Run r;
    if (!engine.ok()) return r;
    for (int64_t s = 0; s < kSteps; ++s) {
      auto step = (*engine)->TrainStep(testing::RandomTokenBatch(model, s, testing::kSmallVocab));
      EXPECT_TRUE(step.ok()) << step.status();
      if (!step.ok()) return r;
      r.outcome.losses.push_back(step->loss);
      r.peak_bytes = std::max(r.peak_bytes, step->peak_bytes);
      r.activation_peak = std::max(r.activation_peak, step->rank_peak_activation_bytes.at(0));
      r.gradient_peak = std::max(r.gradient_peak, step->rank_peak_gradient_bytes.at(0));
    }
    auto state = (*engine)->WholeState();
    EXPECT_TRUE(state.ok()) << state.status();
    if (state.ok()) r.outcome.state = std::move(*state);
    return r;
  };
  const Run none = run("{}");
  const Run full = run(R"({"recompute": {"enable": true, "granularity": "full"}})");
  const Run selective = run(R"({"recompute": {"enable": true, "granularity": "selective"}})");
  for (const Run* r : {&full, &selective}) {
    ASSERT_EQ(r->outcome.losses.size(), none.outcome.losses.size());
    for (size_t s = 0; s < none.outcome.losses.size(); ++s) EXPECT_EQ(r->outcome.losses[s], none.outcome.losses[s]) << s;
    for (const ir::Value* p : model.Parameters()) {
      EXPECT_EQ(testing::RelativeNormDistance(r->outcome.state.at(p->name()), none.outcome.state.at(p->name())), 0)
          << p->name();
    }
  }
  EXPECT_LT(full.peak_bytes, selective.peak_bytes);
  EXPECT_LT(selective.peak_bytes, none.peak_bytes);
  // By kind: recompute shrinks what the forward leaves for the backward, not the gradients;
  // neither kind's peak exceeds the peak of both.
  EXPECT_LT(full.activation_peak, none.activation_peak);
  EXPECT_EQ(full.gradient_peak, none.gradient_peak);
  for (const Run* r : {&none, &selective, &full}) {
    EXPECT_GT(r->gradient_peak, 0);
    EXPECT_LE(r->activation_peak, r->peak_bytes);
    EXPECT_LE(r->gradient_peak, r->peak_bytes);
  }
}

// Tensors the communication stream makes count from their submission: under data parallelism
// every all-reduced gradient exists before the update reads it, so the gradient peak holds them
// all (counting a stream result only when the compute thread awaited it saw one at a time).
TEST(MemoryAccountingTest, StreamResultsCountFromTheirSubmission) {
  const ir::Program model = BuildModel("gpt", ir::DataType::kFloat32);
  EngineOptions o = testing::EquivalenceOptions();
  o.strategy_json = R"({"dp_degree": 2})";
  o.gradient_bucket_bytes = 4096;  // buckets go out all along the backward
  auto engine = Engine::Create(model.Clone(), o);
  ASSERT_TRUE(engine.ok()) << engine.status();
  auto step = (*engine)->TrainStep(testing::RandomTokenBatch(model, 0, testing::kSmallVocab));
  ASSERT_TRUE(step.ok()) << step.status();
  int64_t gradient_bytes = 0;
  for (const ir::Value* p : model.Parameters()) gradient_bytes += p->type().num_bytes();
  for (int64_t peak : step->rank_peak_gradient_bytes) EXPECT_GE(peak, gradient_bytes);
}

// Without avg, the step's gradient is the sum over the k micro-batches: with SGD that is one
// rank's large-batch step at k times the learning rate, and the training loss reported is the
// sum of the micro-batches' mean losses, k times the batch mean. Evaluation reports the batch's
// mean, whatever the step does with its gradients (it reported the sum: held-out losses then
// depended on the training strategy).
TEST(GradientMergeTest, WithoutAverageSumsTheMicroBatches) {
  constexpr int64_t k = 4;
  const ir::Program model = testing::BuildSmallModel("gpt", ir::DataType::kFloat64, kLayers, kBatch);
  EngineOptions single = testing::EquivalenceOptions();
  single.optimizer.type = passes::OptimizerType::kSgd;
  single.lr.base *= k;
  const RunOutcome want = TrainSteps(model.Clone(), single, kSteps, testing::kSmallVocab);
  EngineOptions merged = testing::EquivalenceOptions();
  merged.optimizer.type = passes::OptimizerType::kSgd;
  merged.strategy_json = absl::StrCat(R"({"gradient_merge": {"enable": true, "k_steps": )", k, R"(, "avg": false}})");
  RunOutcome got = TrainSteps(model.Clone(), merged, kSteps, testing::kSmallVocab);
  ASSERT_EQ(got.losses.size(), want.losses.size());
  for (double& loss : got.losses) loss /= k;
  ASSERT_TRUE(got.eval_loss.has_value());
  ExpectSameTraining(got, want, model, 1e-10);
}

TEST(GradientMergeTest, WithAPipelineTheMicroBatchesMustAgree) {
  const ir::Program model = testing::BuildSmallModel("gpt", ir::DataType::kFloat32, kLayers, kBatch);
  EngineOptions o = testing::EquivalenceOptions();
  o.strategy_json = R"({"pp_degree": 2, "pipeline": {"accumulate_steps": 2}, "gradient_merge": {"enable": true, "k_steps": 4}})";
  auto engine = Engine::Create(model.Clone(), o);
  ASSERT_FALSE(engine.ok());
  EXPECT_NE(engine.status().message().find("gradient_merge.k_steps"), std::string::npos) << engine.status();
}

// Hybrid sharding keeps on each rank what its group of `degree` ranks shards: parameters and
// optimizer states of ZeRO 3 with degree 2 of dp 4 are half of dp 4's, twice those of ZeRO 3 over
// all 4 (less what each leaves whole), and equal on every rank.
TEST(ShardingTest, HybridShardsHoldTheShareOfTheirGroup) {
  const ir::Program model = BuildModel("gpt", ir::DataType::kFloat32);
  auto persistent_bytes = [&](const std::string& strategy) {
    EngineOptions o = testing::EquivalenceOptions();
    o.strategy_json = strategy;
    auto engine = Engine::Create(model.Clone(), o);
    EXPECT_TRUE(engine.ok()) << engine.status();
    std::vector<int64_t> bytes;
    if (!engine.ok()) return bytes;
    for (const auto& rank : (*engine)->local_ranks()) {
      int64_t b = 0;
      for (const ir::Value* arg : rank->train_program().block().arguments()) {
        if (arg->role() == ir::ValueRole::kParameter || arg->role() == ir::ValueRole::kOptimizerState) {
          b += arg->type().num_bytes();
        }
      }
      bytes.push_back(b);
    }
    return bytes;
  };
  const std::vector<int64_t> dp = persistent_bytes(R"({"dp_degree": 4})");
  const std::vector<int64_t> hybrid = persistent_bytes(HybridZero(3, R"("dp_degree": 4)"));
  const std::vector<int64_t> full = persistent_bytes(Zero(3, R"("dp_degree": 4)"));
  ASSERT_EQ(hybrid.size(), 4u);
  ASSERT_EQ(dp.size(), 4u);
  ASSERT_EQ(full.size(), 4u);
  for (size_t r = 0; r < 4; ++r) {
    EXPECT_EQ(hybrid[r], hybrid[0]) << "rank " << r;
    // Only the one-element beta powers stay whole: a few bytes over exactly half.
    EXPECT_GE(2 * hybrid[r], dp[r]) << "rank " << r;
    EXPECT_LE(2 * hybrid[r], dp[r] + dp[r] / 50) << "rank " << r;
    EXPECT_LT(full[r], hybrid[r]) << "rank " << r;
  }
}

// sharding.accumulate_shards: each micro-batch's gradients are reduce-scattered as its backward
// makes them and only the shards are summed, so a step of 2 micro-batches on dp 4 holds a
// quarter of the summed gradients instead of all of them; without it, ZeRO 2 sums whole gradients
// (the second micro-batch's beside the first's sums: twice the model's gradients at the peak).
TEST(ShardingTest, AccumulatingShardsHoldsASliceOfEachGradientSum) {
  const ir::Program model = BuildModel("gpt", ir::DataType::kFloat32);
  auto gradient_peak = [&](bool shards) {
    EngineOptions o = testing::EquivalenceOptions();
    o.strategy_json = absl::StrCat(R"({"dp_degree": 4, "gradient_merge": {"enable": true, "k_steps": 2},
                                       "sharding": {"enable": true, "stage": 2, "accumulate_shards": )",
                                   shards ? "true" : "false", "}}");
    o.gradient_bucket_bytes = 4096;
    auto engine = Engine::Create(model.Clone(), o);
    EXPECT_TRUE(engine.ok()) << engine.status();
    if (!engine.ok()) return int64_t{0};
    auto step = (*engine)->TrainStep(testing::RandomTokenBatch(model, 0, testing::kSmallVocab));
    EXPECT_TRUE(step.ok()) << step.status();
    return step.ok() ? *std::max_element(step->rank_peak_gradient_bytes.begin(), step->rank_peak_gradient_bytes.end())
                     : int64_t{0};
  };
  int64_t gradient_bytes = 0;
  for (const ir::Value* p : model.Parameters()) gradient_bytes += p->type().num_bytes();
  const int64_t whole = gradient_peak(false), shards = gradient_peak(true);
  EXPECT_GE(whole, gradient_bytes);
  EXPECT_GT(shards, 0);
  EXPECT_LT(shards, whole * 3 / 4) << "whole " << whole << ", shards " << shards << ", model's gradients " << gradient_bytes;
}

}  // namespace
}  // namespace pdist::engine
