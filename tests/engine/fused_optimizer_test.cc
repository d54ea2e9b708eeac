// Multi-tensor updates (passes/fuse_optimizer.h) are the same computation: with fuse_optimizer
// on, every strategy trains bit for bit as with one update per parameter — losses, parameters
// and optimizer states — with adamw, sgd and momentum (nesterov), in f32 and f64, under bf16 o2
// (the masters' casts taken into the merged update: multi_precision), f16 with skipped steps (skip_update shared by every
// group), ZeRO 1/2/3 (all-gathers of updated shards moved after it) and pipelines (one merged op
// per job); and the programs do merge.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <utility>
#include <string>
#include <variant>

#include "absl/strings/str_cat.h"
#include "ir/builder.h"
#include "ir/models/gpt.h"
#include "ir/ops/merged_updates.h"
#include "passes/distributed_programs.h"
#include "passes/fuse_optimizer.h"
#include "tests/engine/distributed_test_util.h"

namespace pdist::engine {
namespace {

using testing::RunOutcome;

constexpr int64_t kSteps = 4;
// f16 from a loss scale of 2^20: the first steps overflow and are skipped, the later ones update.
constexpr char kLossScale[] = "1048576";

struct Case {
  std::string name;
  std::string strategy;
  ir::DataType dtype;
  passes::OptimizerType optimizer = passes::OptimizerType::kAdamW;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

RunOutcome Train(const Case& c, bool fuse) {
  EngineOptions o = testing::EquivalenceOptions();
  o.strategy_json = c.strategy;
  o.fuse_optimizer = fuse;
  o.optimizer.type = c.optimizer;
  o.optimizer.use_nesterov = c.optimizer == passes::OptimizerType::kMomentum;
  return testing::TrainSteps(testing::BuildSmallModel("gpt", c.dtype, 2, 8), o, kSteps, testing::kSmallVocab);
}

class FusedOptimizerTest : public ::testing::TestWithParam<Case> {};

TEST_P(FusedOptimizerTest, TrainsBitForBitAsOneUpdatePerParameter) {
  testing::ExpectBitForBit(Train(GetParam(), true), Train(GetParam(), false), kSteps);
}

std::string Json(const std::string& body) { return absl::StrCat("{", body, "}"); }

INSTANTIATE_TEST_SUITE_P(
    Strategies, FusedOptimizerTest,
    ::testing::Values(
        Case{"one_rank_f64", "", ir::DataType::kFloat64}, Case{"one_rank_f32", "", ir::DataType::kFloat32},
        Case{"bf16_o2", Json(R"("amp": {"enable": true, "dtype": "bfloat16", "level": "o2"})"), ir::DataType::kFloat32},
        Case{"f16_o2_skipped_steps",
             Json(absl::StrCat(R"("amp": {"enable": true, "dtype": "float16", "level": "o2", "init_loss_scaling": )",
                               kLossScale, R"(, "decr_every_n_nan_or_inf": 1})")),
             ir::DataType::kFloat32},
        Case{"dp2_mp2", Json(R"("dp_degree": 2, "mp_degree": 2)"), ir::DataType::kFloat64},
        Case{"dp2_zero1", Json(R"("dp_degree": 2, "sharding": {"enable": true, "stage": 1})"), ir::DataType::kFloat64},
        Case{"dp2_zero3", Json(R"("dp_degree": 2, "sharding": {"enable": true, "stage": 3})"), ir::DataType::kFloat32},
        Case{"sgd_dp2_zero1", Json(R"("dp_degree": 2, "sharding": {"enable": true, "stage": 1})"), ir::DataType::kFloat64,
             passes::OptimizerType::kSgd},
        Case{"momentum_bf16_o2", Json(R"("amp": {"enable": true, "dtype": "bfloat16", "level": "o2"})"),
             ir::DataType::kFloat32, passes::OptimizerType::kMomentum},
        Case{"bf16_o2_dp2_zero2",
             Json(R"("dp_degree": 2, "sharding": {"enable": true, "stage": 2}, "amp": {"enable": true, "dtype": "bfloat16", "level": "o2"})"),
             ir::DataType::kFloat32},
        Case{"sgd_bf16_o2_dp2_zero1",
             Json(R"("dp_degree": 2, "sharding": {"enable": true, "stage": 1}, "amp": {"enable": true, "dtype": "bfloat16", "level": "o2"})"),
             ir::DataType::kFloat32, passes::OptimizerType::kSgd},
        Case{"momentum_mp2", Json(R"("mp_degree": 2)"), ir::DataType::kFloat64, passes::OptimizerType::kMomentum},
        Case{"pp2_1f1b_dp2",
             Json(R"("dp_degree": 2, "pp_degree": 2, "pipeline": {"enable": true, "schedule_mode": "1F1B", "accumulate_steps": 2})"),
             ir::DataType::kFloat64}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

// What the engine runs with fuse_optimizer does merge: a rank's adamw ops of one parameter and
// gradient dtype become one merged_adamw (ZeRO-1: the shards, their all-gathers after it; bf16
// o2: the f32 masters with their bf16 gradients, and the parameters o2 keeps in f32 — the norms'
// — with f32 gradients).
TEST(FuseOptimizerTest, RankProgramsMergeTheirUpdates) {
  for (const auto& [strategy_json, kinds] :
       {std::pair{Json(R"("dp_degree": 2, "sharding": {"enable": true, "stage": 1})"), 1},
        std::pair{Json(R"("dp_degree": 2, "amp": {"enable": true, "dtype": "bfloat16", "level": "o2"})"), 2}}) {
    SCOPED_TRACE(strategy_json);
    const ir::Program model = testing::BuildSmallModel("gpt", ir::DataType::kFloat32, 2, 8);
    absl::StatusOr<ir::Program> local =
        testing::LocalTrainProgram(model, strategy_json, 1, int64_t{1} << 20, {.optimizer = true});
    ASSERT_TRUE(local.ok()) << local.status();
    absl::StatusOr<ir::Program> unmerged = testing::LocalTrainProgram(model, strategy_json, 1, int64_t{1} << 20, {});
    ASSERT_TRUE(unmerged.ok()) << unmerged.status();
    // Each kind's updates in groups of at most kMergedUpdates, in program order: a last group of
    // one stays an adamw.
    int64_t adamw = 0;
    std::set<ir::DataType> gradient_dtypes;
    for (const auto& op : local->block().ops()) {
      adamw += op->type() == "adamw";
      if (op->type() == "merged_adamw") gradient_dtypes.insert(op->operand(3)->type().dtype);
    }
    EXPECT_LE(adamw, kinds);
    EXPECT_EQ(static_cast<int>(gradient_dtypes.size()), kinds);
    EXPECT_EQ(local->updates().size(), unmerged->updates().size());
  }
}

// The f16 case above compares skipped steps and updates: with the merged op the first steps are
// skipped (skip_update, shared by the whole group) and the later ones are not.
TEST(FuseOptimizerTest, TheF16CaseSkipsSomeStepsAndUpdatesOthers) {
  EngineOptions o = testing::EquivalenceOptions();
  o.strategy_json = Json(absl::StrCat(R"("amp": {"enable": true, "dtype": "float16", "level": "o2", "init_loss_scaling": )",
                                      kLossScale, R"(, "decr_every_n_nan_or_inf": 1})"));
  o.fuse_optimizer = true;
  const ir::Program model = testing::BuildSmallModel("gpt", ir::DataType::kFloat32, 2, 8);
  auto engine = Engine::Create(model.Clone(), o);
  ASSERT_TRUE(engine.ok()) << engine.status();
  int64_t skipped = 0;
  for (int64_t step = 0; step < kSteps; ++step) {
    absl::StatusOr<StepResult> r = (*engine)->TrainStep(testing::RandomTokenBatch(model, step, testing::kSmallVocab));
    ASSERT_TRUE(r.ok()) << r.status();
    skipped = r->skipped_steps;
  }
  EXPECT_GT(skipped, 0);
  EXPECT_LT(skipped, kSteps);
}

// Every optimizer's updates merge into its own merged op.
TEST(FuseOptimizerTest, EachOptimizerHasItsMergedOp) {
  for (const auto& [type, merged] : {std::pair{passes::OptimizerType::kSgd, "merged_sgd"},
                                     std::pair{passes::OptimizerType::kMomentum, "merged_momentum"},
                                     std::pair{passes::OptimizerType::kAdamW, "merged_adamw"}}) {
    ir::Program program = testing::BuildSmallModel("gpt", ir::DataType::kFloat32, 2, 8);
    passes::PassContext context;
    ASSERT_TRUE(passes::RunPipeline(passes::SingleRankPipeline({.type = type}, {.optimizer = true}), program,
                                    context, "training program")
                    .ok());
    std::map<std::string, int64_t> count;
    for (const auto& op : program.block().ops()) ++count[op->type()];
    EXPECT_GE(count[merged], 1) << merged;
    EXPECT_LE(count[passes::OptimizerTypeName(type)], 1) << merged;  // a last group of one stays
  }
}

// A merged op's new values are alive together until it has run: each holds at most
// kMergedUpdates updates and kMergedUpdateBytes of results. A GPT whose MLP weights make 48 MiB
// of new values each (f32 weight and two moments of 1024 × 4096) cannot put two of them in one
// op; and more updates than one op takes make several.
TEST(FuseOptimizerTest, AMergedOpHoldsAtMostABoundedShareOfTheNewValues) {
  ir::models::GptConfig cfg = testing::SmallConfig<ir::models::GptConfig>(ir::DataType::kFloat32, 12, 2);
  cfg.hidden = 1024;
  cfg.heads = 8;
  absl::StatusOr<ir::Program> program = ir::models::BuildGpt(cfg);
  ASSERT_TRUE(program.ok()) << program.status();
  passes::PassContext context;
  ASSERT_TRUE(passes::RunPipeline(passes::SingleRankPipeline({}), *program, context, "training program").ok());
  int64_t updates = 0, alone = 0, largest = 0;
  for (const auto& op : program->block().ops()) {
    if (op->type() != "adamw") continue;
    ++updates;
    int64_t bytes = 0;
    for (const ir::Value* r : op->results()) bytes += r->type().num_bytes();
    largest = std::max(largest, bytes);
  }
  ASSERT_GT(largest, passes::kMergedUpdateBytes / 2);
  ASSERT_GT(updates, static_cast<int64_t>(passes::kMergedUpdates));
  const passes::FuseOptimizerReport report = passes::FuseOptimizerUpdates(*program);
  EXPECT_GE(report.merged_ops, 2);
  for (const auto& op : program->block().ops()) {
    alone += op->type() == "adamw";
    if (op->type() != "merged_adamw") continue;
    int64_t bytes = 0;
    for (const ir::Value* r : op->results()) bytes += r->type().num_bytes();
    EXPECT_LE(bytes, passes::kMergedUpdateBytes);
    EXPECT_LE(op->num_results() / 5, passes::kMergedUpdates);
  }
  EXPECT_EQ(report.updates + alone, updates);
}

// Under bf16 o2 the merged updates of the f32 masters take in their casts to bf16: no cast of a
// new master is left beside a merged op, each such op is multi_precision with one more result per
// parameter, and those results are the bf16 parameters' new values (on ZeRO-2's shards too, whose
// all-gathers read them, after the merged op).
TEST(FuseOptimizerTest, MergedUpdatesTakeInTheMasterWeightCasts) {
  absl::StatusOr<ir::Program> local = testing::LocalTrainProgram(
      testing::BuildSmallModel("gpt", ir::DataType::kFloat32, 2, 8),
      Json(R"("dp_degree": 2, "sharding": {"enable": true, "stage": 2}, "amp": {"enable": true, "dtype": "bfloat16", "level": "o2"})"),
      0, int64_t{1} << 20, {.optimizer = true});
  ASSERT_TRUE(local.ok()) << local.status();
  const ir::MergedUpdate& adamw = *ir::MergedUpdateOfMerged("merged_adamw");
  std::set<const ir::Value*> copies, gathered;
  for (const auto& op : local->block().ops()) {
    if (op->type() == "cast") {
      const ir::Operation* producer = op->operand(0)->producer();
      EXPECT_FALSE(producer != nullptr && producer->type() == "merged_adamw") << op->Describe();
    }
    if (op->type() == "c_allgather" && copies.count(op->operand(0))) gathered.insert(op->operand(0));
    if (op->type() != "merged_adamw" || op->operand(3)->type().dtype != ir::DataType::kBFloat16) continue;
    EXPECT_TRUE(ir::IsMultiPrecision(op->attrs())) << op->Describe();
    const size_t members = ir::MergedParameters(adamw, op->num_operands());
    ASSERT_EQ(op->num_results(), 6 * members);
    for (size_t p = 0; p < members; ++p) {
      const ir::Value* copy = op->result(6 * p + 5);
      EXPECT_EQ(copy->type(), (ir::TensorType{op->operand(ir::MergedOperand(adamw, p, 0))->type().shape,
                                              ir::DataType::kBFloat16}));
      copies.insert(copy);
    }
  }
  // ZeRO-2 shards every matrix over dp 2: each rounded shard is gathered into its parameter.
  EXPECT_GE(copies.size(), 8u);
  EXPECT_EQ(gathered.size(), copies.size());
}

// multi_precision is for an f32 master weight with a bf16/f16 gradient; anything else is named.
TEST(FuseOptimizerTest, MultiPrecisionNeedsAnF32MasterAndALowPrecisionGradient) {
  ir::Program p;
  ir::Builder b(&p);
  const ir::TensorType scalar{{}, ir::DataType::kFloat32};
  ir::Value* lr = b.Data("lr", scalar);
  ir::Value* w = b.Data("w", {{4, 3}, ir::DataType::kFloat32});
  ir::Value* g32 = b.Data("g32", {{4, 3}, ir::DataType::kFloat32});
  ir::Value* g16 = b.Data("g16", {{4, 3}, ir::DataType::kBFloat16});
  absl::StatusOr<std::vector<ir::Value*>> mixed =
      b.Create("merged_sgd", {lr, nullptr, w, g16, w, g16}, {{ir::kMultiPrecision, true}});
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  ASSERT_EQ(mixed->size(), 4u);
  EXPECT_EQ((*mixed)[1]->type(), (ir::TensorType{{4, 3}, ir::DataType::kBFloat16}));
  absl::StatusOr<std::vector<ir::Value*>> plain =
      b.Create("merged_sgd", {lr, nullptr, w, g32}, {{ir::kMultiPrecision, true}});
  ASSERT_FALSE(plain.ok());
  EXPECT_NE(plain.status().message().find("multi_precision updates an f32 master weight"), std::string::npos)
      << plain.status();
  EXPECT_NE(plain.status().message().find("parameter 0"), std::string::npos) << plain.status();
}

// Updates of different dtypes or hyper-parameters stay apart: one merged op per kind.
TEST(FuseOptimizerTest, OnlyLikeUpdatesMerge) {
  ir::Program program = testing::BuildSmallModel("gpt", ir::DataType::kFloat32, 2, 8);
  passes::PassContext context;
  ASSERT_TRUE(passes::RunPipeline(passes::SingleRankPipeline({}), program, context, "training program").ok());
  int64_t updates = 0, changed = 0;
  for (const auto& op : program.block().ops()) {
    if (op->type() != "adamw") continue;
    if (++updates % 3 == 0) {  // every third update with another epsilon
      op->mutable_attrs()["epsilon"] = 1e-6;
      ++changed;
    }
  }
  ASSERT_GE(changed, 2);
  const passes::FuseOptimizerReport report = passes::FuseOptimizerUpdates(program);
  EXPECT_EQ(report.merged_ops, 2);
  EXPECT_EQ(report.updates, updates);
  for (const auto& op : program.block().ops()) {
    if (op->type() != "merged_adamw") continue;
    const int64_t members = static_cast<int64_t>(op->num_operands() - 2) / 6;
    const double epsilon = std::get<double>(op->attrs().at("epsilon"));
    EXPECT_EQ(members, epsilon == 1e-6 ? changed : updates - changed);
  }
}

}  // namespace
}  // namespace pdist::engine
