// The engine runs each rank's schedule as it is defined: job order (from the timeline each rank
// records), zero-bubble's split backward, the memory 1F1B saves over FThenB, and the errors a
// pipeline strategy can raise.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/builder.h"
#include "passes/pipeline_schedule.h"
#include "tests/engine/distributed_test_util.h"

namespace pdist::engine {
namespace {

std::string Pipeline(int64_t pp, const std::string& schedule, int64_t micro_batches, int64_t vpp = 1) {
  return absl::StrCat(R"({"pp_degree": )", pp, R"(, "pipeline": {"enable": true, "schedule_mode": ")", schedule,
                      R"(", "accumulate_steps": )", micro_batches, R"(, "vpp_degree": )", vpp, "}}");
}

absl::StatusOr<std::unique_ptr<Engine>> PipelinedGpt(const std::string& strategy, const std::string& timeline_dir = "") {
  EngineOptions o = testing::EquivalenceOptions();
  o.strategy_json = strategy;
  o.timeline_dir = timeline_dir;
  return Engine::Create(testing::BuildSmallModel("gpt", ir::DataType::kFloat32, /*layers=*/4, /*batch=*/8), o);
}

// The jobs a rank ran, in order, from its timeline.
std::string JobsRun(const RankRunner& runner) {
  std::vector<std::string> names;
  for (const exec::TimelineSpan& span : runner.timeline()->Spans()) {
    if (span.track == exec::Track::kCompute && span.category != "wait") names.push_back(span.name);
  }
  return absl::StrJoin(names, " ");
}

struct OrderCase {
  std::string schedule;
  int64_t pp, micro_batches, vpp;
};

void PrintTo(const OrderCase& c, std::ostream* os) { *os << c.schedule << " pp" << c.pp; }

class PipelineJobOrderTest : public ::testing::TestWithParam<OrderCase> {};

TEST_P(PipelineJobOrderTest, EachRankRunsItsScheduleAndWritesTimelines) {
  const OrderCase& c = GetParam();
  const std::string dir = absl::StrCat(::testing::TempDir(), "pipeline_timeline_", c.schedule, c.pp);
  auto engine = PipelinedGpt(Pipeline(c.pp, c.schedule, c.micro_batches, c.vpp), dir);
  ASSERT_TRUE(engine.ok()) << engine.status();
  ASSERT_EQ((*engine)->world_size(), c.pp);
  const ir::Program& model = (*engine)->forward_program();
  ASSERT_TRUE((*engine)->TrainStep(testing::RandomTokenBatch(model, 0, testing::kSmallVocab)).ok());
  auto mode = passes::ParseScheduleMode(c.schedule);
  ASSERT_TRUE(mode.ok());
  for (const auto& runner : (*engine)->local_ranks()) {
    auto jobs = passes::BuildSchedule(*mode, {c.pp, c.micro_batches, c.vpp}, runner->rank());
    ASSERT_TRUE(jobs.ok()) << jobs.status();
    EXPECT_EQ(JobsRun(*runner), passes::JobsToString(*jobs)) << "rank " << runner->rank();
    EXPECT_TRUE(std::filesystem::exists(absl::StrCat(dir, "/rank", runner->rank(), ".trace.json")));
  }
  std::ifstream svg(absl::StrCat(dir, "/pipeline.svg"));
  std::string text((std::istreambuf_iterator<char>(svg)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("<svg"), std::string::npos);
}

// A step without a pipeline (data and tensor parallel) draws too: its forward, backward and
// optimizer as spans on every rank, and the collectives on the communication track.
TEST(PipelineEngineTest, WholeProgramStepsWriteTimelinesToo) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "dp_mp_timeline");
  auto engine = PipelinedGpt(R"({"dp_degree": 2, "mp_degree": 2})", dir);
  ASSERT_TRUE(engine.ok()) << engine.status();
  ASSERT_TRUE((*engine)->TrainStep(testing::RandomTokenBatch((*engine)->forward_program(), 0, testing::kSmallVocab)).ok());
  for (const auto& runner : (*engine)->local_ranks()) {
    EXPECT_EQ(JobsRun(*runner), "F B O") << "rank " << runner->rank();
    int comm = 0;
    for (const exec::TimelineSpan& span : runner->timeline()->Spans()) comm += span.track == exec::Track::kComm;
    EXPECT_GT(comm, 0) << "rank " << runner->rank();
  }
  EXPECT_TRUE(std::filesystem::exists(absl::StrCat(dir, "/pipeline.svg")));
}

INSTANTIATE_TEST_SUITE_P(Schedules, PipelineJobOrderTest,
                         ::testing::Values(OrderCase{"FThenB", 2, 4, 1}, OrderCase{"1F1B", 4, 4, 1},
                                           OrderCase{"VPP", 2, 4, 2}, OrderCase{"ZBH1", 2, 4, 1}),
                         [](const auto& info) { return absl::StrCat(info.param.schedule, "_pp", info.param.pp); });

// A pipelined step's gradient all-reduces start as soon as the last micro-batch has added its
// share, inside that micro-batch's backward: on every rank the first one goes on the
// communication stream before the optimizer job begins (when the stream's thread gets to run it
// on a machine with fewer cores than threads is another matter: the span's queued time, not its
// start).
TEST(PipelineEngineTest, GradientSyncStartsBeforeTheOptimizerJob) {
  for (const std::string schedule : {"1F1B", "ZBH1"}) {
    std::string strategy = Pipeline(2, schedule, 4);
    strategy.insert(1, R"("dp_degree": 2, )");
    const std::string dir = absl::StrCat(::testing::TempDir(), "gradient_sync_", schedule);
    auto engine = PipelinedGpt(strategy, dir);
    ASSERT_TRUE(engine.ok()) << engine.status();
    ASSERT_TRUE((*engine)->TrainStep(testing::RandomTokenBatch((*engine)->forward_program(), 0, testing::kSmallVocab)).ok());
    for (const auto& runner : (*engine)->local_ranks()) {
      double sync_queued = -1, optimizer_start = -1;
      for (const exec::TimelineSpan& span : runner->timeline()->Spans()) {
        if (span.track == exec::Track::kComm && span.name.rfind("c_allreduce", 0) == 0 &&
            (sync_queued < 0 || span.queued_s < sync_queued)) {
          sync_queued = span.queued_s;
        }
        if (span.track == exec::Track::kCompute && span.name == "O") optimizer_start = span.start_s;
      }
      ASSERT_GE(sync_queued, 0) << schedule << " rank " << runner->rank() << ": no gradient all-reduce";
      ASSERT_GE(optimizer_start, 0) << schedule << " rank " << runner->rank();
      EXPECT_LT(sync_queued, optimizer_start) << schedule << " rank " << runner->rank();
    }
  }
}

TEST(PipelineEngineTest, ZeroBubbleRunsWeightGradientsInTheirOwnJobs) {
  auto engine = PipelinedGpt(Pipeline(2, "ZBH1", 4));
  ASSERT_TRUE(engine.ok()) << engine.status();
  int64_t weight_ops = 0, matmul_grads = 0;
  for (const auto& op : (*engine)->train_program().block().ops()) {
    weight_ops += op->role() == ir::OpRole::kBackwardWeight;
    matmul_grads += op->type() == "matmul_grad";
  }
  EXPECT_GT(weight_ops, 0);
  EXPECT_EQ(matmul_grads, 0) << "every matmul_grad of a weight is split into two products";
}

// 1F1B keeps at most p micro-batches in flight on the first stage, FThenB all m of them (the
// peak also holds the gradient sums, as large as the parameters: docs/benchmarks.md separates
// activations on a model where they dominate).
TEST(PipelineEngineTest, OneForwardOneBackwardHoldsFewerActivationsThanFThenB) {
  auto peak_of_first_stage = [](const std::string& schedule) -> int64_t {
    auto engine = PipelinedGpt(Pipeline(2, schedule, 8));
    EXPECT_TRUE(engine.ok()) << engine.status();
    if (!engine.ok()) return 0;
    auto r = (*engine)->TrainStep(testing::RandomTokenBatch((*engine)->forward_program(), 0, testing::kSmallVocab));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->rank_peak_bytes.at(0) : 0;
  };
  const int64_t fthenb = peak_of_first_stage("FThenB");
  const int64_t one_f_one_b = peak_of_first_stage("1F1B");
  EXPECT_GT(one_f_one_b, 0);
  EXPECT_LT(one_f_one_b, fthenb) << "1F1B " << one_f_one_b << " bytes, FThenB " << fthenb;
}

// x → tanh(x·w0) → dropout → x·w1 → tanh → ·w2 → mean(y²): enough places to cut for 2 stages.
ir::Program DropoutMlp() {
  ir::Program p;
  ir::Builder b(&p);
  const ir::DataType f64 = ir::DataType::kFloat64;
  ir::Value* x = b.Data("tokens", {{8, 16}, f64});
  ir::Value* h = *b.Op1("tanh", {*b.Op1("matmul", {x, b.Parameter("w0", {{16, 32}, f64}, "normal(0.2)")})});
  h = (*b.Create("dropout", {h}, {{"p", 0.3}}))[0];
  h = *b.Op1("tanh", {*b.Op1("matmul", {h, b.Parameter("w1", {{32, 32}, f64}, "normal(0.2)")})});
  ir::Value* y = *b.Op1("matmul", {h, b.Parameter("w2", {{32, 4}, f64}, "normal(0.2)")});
  p.set_loss(*b.Op1("mean", {*b.Op1("multiply", {y, y})}));
  return p;
}

// Each micro-batch draws the dropout mask of its rows of the whole batch, so a pipelined run
// with dropout is the single-rank run (float64, 1e-10) — with data parallelism inside the
// stages too, where each rank draws at its piece's place.
TEST(PipelineEngineTest, DropoutMasksAreThoseOfTheWholeBatch) {
  auto run = [](const std::string& strategy) {
    EngineOptions o = testing::EquivalenceOptions();
    o.strategy_json = strategy;
    return testing::TrainOnSineBatches(DropoutMlp(), o, 5);
  };
  const testing::RunOutcome single = run("");
  testing::ExpectSameTraining(run(Pipeline(2, "1F1B", 4)), single, DropoutMlp(), 1e-10);
  testing::ExpectSameTraining(run(R"({"dp_degree": 2, "pp_degree": 2, "pipeline": {"accumulate_steps": 2}})"), single,
                              DropoutMlp(), 1e-10);
}

TEST(PipelineEngineTest, StrategiesThatCannotRunSayWhy) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {Pipeline(2, "VPP", 3, 2), "VPP needs micro_batches divisible by stages"},
      {Pipeline(2, "1F1B", 3), "not divisible by 3 micro-batches"},
      {Pipeline(1000, "1F1B", 4), "can be cut in only"},
      {Pipeline(2, "1F1B", 4, 2), "only VPP interleaves"},
  };
  for (const auto& [strategy, message] : cases) {
    auto engine = PipelinedGpt(strategy);
    ASSERT_FALSE(engine.ok()) << strategy;
    EXPECT_NE(std::string(engine.status().message()).find(message), std::string::npos) << engine.status();
  }
}

}  // namespace
}  // namespace pdist::engine
