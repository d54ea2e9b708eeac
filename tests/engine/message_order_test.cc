// Every pipelined strategy's step, its point-to-point messages run on all ranks under NCCL's
// rules (engine/message_order.h) — schedules × stages × chunks × tied embeddings × dp/mp —
// and the checker itself against steps that hang.
#include "engine/message_order.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "executor/comm/comm_groups.h"
#include "ir/builder.h"
#include "ir/dist/process_mesh.h"
#include "passes/partition.h"
#include "passes/distributed_programs.h"
#include "tests/engine/distributed_test_util.h"

namespace pdist::engine {
namespace {

using ::testing::HasSubstr;

// Every rank's local training program and step under `strategy_json`.
absl::Status CheckStrategy(const ir::Program& forward, const std::string& strategy_json) {
  PDIST_ASSIGN_OR_RETURN(strategy::Strategy strategy, strategy::ParseStrategy(strategy_json));
  PDIST_ASSIGN_OR_RETURN(passes::DistributedPrograms p, passes::BuildDistributedPrograms(forward, strategy, {}));
  passes::ReshardPlanCache plans;
  std::vector<ir::Program> locals;
  std::vector<RankStep> steps;
  locals.reserve(static_cast<size_t>(p.world_size));
  for (int64_t r = 0; r < p.world_size; ++r) {
    PDIST_ASSIGN_OR_RETURN(ir::Program local, passes::LocalProgram(p.train, passes::RankPipeline(r, 1 << 20), plans));
    locals.push_back(std::move(local));
  }
  for (int64_t r = 0; r < p.world_size; ++r) {
    PDIST_ASSIGN_OR_RETURN(std::vector<ir::PipelineJob> jobs, p.pipeline.JobsOf(r, /*forward_only=*/false));
    steps.push_back({.rank = r, .program = &locals[static_cast<size_t>(r)], .jobs = std::move(jobs)});
  }
  return CheckMessageOrder(steps);
}

ir::Program SmallGpt(int64_t layers, bool tied) {
  auto cfg = testing::SmallConfig<ir::models::GptConfig>(ir::DataType::kFloat32, layers, /*batch=*/16);
  cfg.tied_embeddings = tied;
  return *ir::models::BuildGpt(cfg);
}

// `pipeline_extra` goes into the pipeline section, `extra` after it.
std::string Pipeline(int64_t pp, const std::string& schedule, int64_t vpp, int64_t micro_batches,
                     const std::string& extra = "", const std::string& pipeline_extra = "") {
  return absl::StrCat(R"({"pp_degree": )", pp, R"(, "pipeline": {"schedule_mode": ")", schedule,
                      R"(", "vpp_degree": )", vpp, R"(, "accumulate_steps": )", micro_batches, pipeline_extra, "}",
                      extra, "}");
}

// Session 29's finds: VPP with a tied embedding (the head's share of the table's gradient left
// in its backward, beside an activation gradient that stage 0 receives in another job; the
// table itself sent to a stage that is not the next), and VPP cut into more virtual stages
// than layers (values read two stages on). Each strategy below hung over NCCL's rules.
TEST(MessageOrderTest, EveryScheduleAndLayoutKeepsEachChannelInOrder) {
  struct Case {
    int64_t layers;
    bool tied;
    std::string strategy;
    bool refused = false;  // more virtual stages than cuts where no value skips a stage
  };
  std::vector<Case> cases;
  for (bool tied : {false, true}) {
    for (const char* schedule : {"FThenB", "1F1B", "ZBH1"}) {
      for (int64_t pp : {2, 4}) cases.push_back({4, tied, Pipeline(pp, schedule, 1, 8)});
    }
    cases.push_back({4, tied, Pipeline(2, "VPP", 2, 2)});
    cases.push_back({4, tied, Pipeline(2, "VPP", 2, 8)});
    cases.push_back({6, tied, Pipeline(2, "VPP", 3, 4)});
    cases.push_back({8, tied, Pipeline(2, "VPP", 4, 4)});
    cases.push_back({4, tied, Pipeline(4, "VPP", 2, 8)});
    cases.push_back({8, tied, Pipeline(4, "VPP", 2, 8)});
    cases.push_back({8, tied, Pipeline(4, "VPP", 2, 4, R"(, "dp_degree": 2)")});
    cases.push_back({8, tied, Pipeline(2, "VPP", 4, 4, R"(, "mp_degree": 2)")});
    // 16 virtual stages of 4 layers: they deadlocked, cut where the residual skipped a stage.
    cases.push_back({4, tied, Pipeline(4, "VPP", 4, 8), /*refused=*/true});
    cases.push_back({4, tied, Pipeline(8, "VPP", 2, 8), /*refused=*/true});
    cases.push_back({4, tied, Pipeline(4, "VPP", 3, 8)});  // 12: cut inside layers, no value skips
    // Marks that make the residual skip from virtual stage 0 to 2, both on rank 0: no message.
    cases.push_back({4, tied, Pipeline(2, "VPP", 2, 4, "", R"(, "split_before": ["gpt.h.1.attn.qkv*", "gpt.h.1.attn.proj*", "gpt.h.2.*"])")});
    cases.push_back({4, tied, Pipeline(2, "VPP", 2, 4, R"(, "sharding": {"enable": true, "stage": 2}, "dp_degree": 2)")});
  }
  for (const Case& c : cases) {
    const absl::Status s = CheckStrategy(SmallGpt(c.layers, c.tied), c.strategy);
    if (c.refused) {
      EXPECT_THAT(s.message(), HasSubstr("so that every value is read on its own stage or the next")) << c.strategy;
      continue;
    }
    EXPECT_TRUE(s.ok()) << (c.tied ? "tied, " : "") << c.layers << " layers, " << c.strategy << ": " << s;
  }
}

// The tied table is the same for every micro-batch: stage 0 sends it to the last stage once per
// step, in the prologue, on a lane of its own (in order anywhere: every rank runs its prologue
// first), where it went once per micro-batch; the residual stream goes to the next stage per
// micro-batch on lane 0.
TEST(MessageOrderTest, TheTiedTableGoesToTheLastStageOnceAStepInThePrologue) {
  const ir::Program forward = SmallGpt(/*layers=*/4, /*tied=*/true);
  const strategy::Strategy strategy = *strategy::ParseStrategy(Pipeline(4, "1F1B", 1, 4));
  auto p = passes::BuildDistributedPrograms(forward, strategy, {});
  ASSERT_TRUE(p.ok()) << p.status();
  passes::ReshardPlanCache plans;
  for (int64_t rank : {0, 3}) {
    auto local = passes::LocalProgram(p->train, passes::RankPipeline(rank, std::nullopt), plans);
    ASSERT_TRUE(local.ok()) << local.status();
    int64_t table_moves = 0;
    for (const auto& op : local->block().ops()) {
      if (op->type() != "c_send" && op->type() != "c_recv") continue;
      const ir::Value& moved = op->type() == "c_send" ? *op->operand(0) : *op->result(0);
      const int64_t peer = *ir::GetInt(op->attrs(), "peer"), lane = *ir::GetInt(op->attrs(), "lane");
      if (moved.type().shape == ir::Shape{testing::kSmallVocab, 32} && op->role() != ir::OpRole::kOptimizer) {
        ++table_moves;
        EXPECT_EQ(op->role(), ir::OpRole::kPrologue) << op->Describe();
        EXPECT_EQ(peer, rank == 0 ? 3 : 0);
        EXPECT_GT(lane, 0) << op->Describe();
      } else {
        EXPECT_EQ(lane, 0) << op->Describe();
      }
    }
    EXPECT_EQ(table_moves, 1) << "rank " << rank;
  }
}

// A move the schedule does not order with the rest — made in a forward job, read in a backward
// one on the next stage — gets a lane of its own (partition's LaneOf); the same move read in the
// forward does not.
TEST(MessageOrderTest, AMoveFromAForwardJobToABackwardOneGetsALaneOfItsOwn) {
  for (ir::OpRole reader : {ir::OpRole::kBackward, ir::OpRole::kForward}) {
    ir::Program global;
    ir::Builder b(&global);
    const ir::ProcessMesh first = *ir::ProcessMesh::Create({1}, {0}, {"x"});
    const ir::ProcessMesh second = *ir::ProcessMesh::Create({1}, {1}, {"x"});
    auto on = [](ir::Value* v, const ir::ProcessMesh& mesh) {
      v->set_dist_attr(ir::DistAttr::Replicated(mesh, 1));
      return v;
    };
    ir::Value* x = on(b.Data("x", {{4}, ir::DataType::kFloat32}), first);
    ir::Value* y = on(*b.Op1("scale", {x}, {{"scale", 2.0}}), first);
    b.set_op_role(reader);
    ir::Value* moved = on(*b.Op1("reshard", {y}), second);
    on(*b.Op1("scale", {moved}, {{"scale", 3.0}}), second);
    passes::ReshardPlanCache plans;
    for (int64_t rank : {0, 1}) {
      auto local = passes::PartitionProgram(global, rank, plans);
      ASSERT_TRUE(local.ok()) << local.status();
      int64_t messages = 0;
      for (const auto& op : local->block().ops()) {
        if (op->type() != "c_send" && op->type() != "c_recv") continue;
        ++messages;
        const int64_t lane = *ir::GetInt(op->attrs(), "lane");
        if (reader == ir::OpRole::kBackward) {
          EXPECT_GT(lane, 0) << op->Describe();
        } else {
          EXPECT_EQ(lane, 0) << op->Describe();
        }
      }
      EXPECT_EQ(messages, 1) << "rank " << rank;
    }
  }
}

// The channels are made once, from the training and evaluation programs (RankRunner::Connect);
// the prediction program, made later, must find every one it sends on among them — a lane keyed
// by something the programs number differently (the message tag) would not be there.
TEST(MessageOrderTest, ThePredictionProgramUsesTheChannelsOfTrainingAndEvaluation) {
  for (const std::string& json : {Pipeline(4, "1F1B", 1, 4), Pipeline(4, "VPP", 2, 4), Pipeline(2, "VPP", 2, 4)}) {
    const ir::Program forward = SmallGpt(/*layers=*/4, /*tied=*/true);
    const strategy::Strategy strategy = *strategy::ParseStrategy(json);
    auto p = passes::BuildDistributedPrograms(forward, strategy, {});
    ASSERT_TRUE(p.ok()) << p.status();
    auto predict = passes::BuildPredictProgram(forward, strategy, p->train, p->world_size);
    ASSERT_TRUE(predict.ok()) << predict.status();
    passes::ReshardPlanCache plans;
    for (int64_t r = 0; r < p->world_size; ++r) {
      std::set<exec::comm::ChannelKey> made;
      for (const ir::Program* global : {&p->train, &p->eval}) {
        auto local = passes::LocalProgram(*global, passes::RankPipeline(r, std::nullopt), plans);
        ASSERT_TRUE(local.ok()) << local.status();
        for (const exec::comm::ChannelKey& key : exec::comm::ChannelsOf(*local, r)) made.insert(key);
      }
      auto local = passes::LocalProgram(*predict, passes::RankPipeline(r, std::nullopt), plans);
      ASSERT_TRUE(local.ok()) << local.status();
      for (const exec::comm::ChannelKey& key : exec::comm::ChannelsOf(*local, r)) {
        EXPECT_TRUE(made.count(key)) << json << ": rank " << r << " predicts over channel " << exec::comm::ToString(key)
                                     << ", which training and evaluation do not use";
      }
    }
  }
}

// A two-rank step by hand: rank 1 sends tags 1 and 2; rank 0 receives them in `order`.
absl::Status TwoRanks(const std::vector<int64_t>& order, int64_t lane_of_2 = 0) {
  ir::Program sender, receiver;
  sender.set_local_rank(1);
  receiver.set_local_rank(0);
  ir::Builder s(&sender), r(&receiver);
  ir::Value* x = s.Data("x", {{4}, ir::DataType::kFloat32});
  for (int64_t tag : {1, 2}) {
    EXPECT_TRUE(s.Create("c_send", {x}, {{"peer", int64_t{0}}, {"tag", tag}, {"lane", tag == 2 ? lane_of_2 : 0}}).ok());
  }
  for (int64_t tag : order) {
    EXPECT_TRUE(r.Op1("c_recv", {}, {{"peer", int64_t{1}}, {"shape", std::vector<int64_t>{4}},
                                     {"dtype", ir::DataType::kFloat32}, {"tag", tag}, {"lane", tag == 2 ? lane_of_2 : 0}})
                    .ok());
  }
  const std::vector<ir::PipelineJob> one = {{.kind = ir::JobKind::kForward}};
  return CheckMessageOrder({{.rank = 0, .program = &receiver, .jobs = one}, {.rank = 1, .program = &sender, .jobs = one}});
}

TEST(MessageOrderTest, NamesAReceiveThatWouldGetAnotherMessageAndAMessageNeverReceived) {
  EXPECT_TRUE(TwoRanks({1, 2}).ok());
  const absl::Status swapped = TwoRanks({2, 1});
  EXPECT_THAT(swapped.message(), HasSubstr("out of order on channel 1 > 0: rank 0's receive of tag 2 (micro-batch 0, "
                                           "job F0, op #0) would get rank 1's send of tag 1"));
  // On lanes of their own, each channel holds one tag: any order meets.
  EXPECT_TRUE(TwoRanks({2, 1}, /*lane_of_2=*/2).ok()) << TwoRanks({2, 1}, 2);
  EXPECT_THAT(TwoRanks({1}).message(), HasSubstr("rank 1's send of tag 2 (micro-batch 0, job F0, op #1) on channel 1 > 0 "
                                                 "is never received"));
}

// What a process checks before its first step (Engine::PrepareDistributed over NCCL): its own
// ranks and those they exchange messages with, transitively — the column of stages, not the dp
// replicas beside it.
TEST(MessageOrderTest, AProcessChecksTheStagesItExchangesWithAndNoOthers) {
  const ir::Program forward = SmallGpt(/*layers=*/4, /*tied=*/true);
  const strategy::Strategy strategy = *strategy::ParseStrategy(Pipeline(4, "1F1B", 1, 4, R"(, "dp_degree": 2)"));
  auto p = passes::BuildDistributedPrograms(forward, strategy, {});
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->world_size, 8);
  passes::ReshardPlanCache plans;
  std::map<int64_t, ir::Program> built;
  auto step_of = [&](int64_t rank) -> absl::StatusOr<RankStep> {
    PDIST_ASSIGN_OR_RETURN(ir::Program local, passes::LocalProgram(p->train, passes::RankPipeline(rank, std::nullopt), plans));
    PDIST_ASSIGN_OR_RETURN(std::vector<ir::PipelineJob> jobs, p->pipeline.JobsOf(rank, /*forward_only=*/false));
    return RankStep{.rank = rank, .program = &built.emplace(rank, std::move(local)).first->second, .jobs = std::move(jobs)};
  };
  const absl::Status s = CheckMessageOrderAround({0}, step_of);
  EXPECT_TRUE(s.ok()) << s;
  // The stage mesh is [pp, dp]: rank 0's column is every other rank.
  std::set<int64_t> checked;
  for (const auto& [rank, program] : built) checked.insert(rank);
  EXPECT_EQ(checked, (std::set<int64_t>{0, 2, 4, 6}));
}

TEST(MessageOrderTest, NamesEveryRankLeftWaiting) {
  // Each rank receives before it sends: both wait for ever.
  std::vector<ir::Program> programs(2);
  for (int64_t rank : {0, 1}) {
    ir::Program& p = programs[static_cast<size_t>(rank)];
    p.set_local_rank(rank);
    ir::Builder b(&p);
    auto got = b.Op1("c_recv", {}, {{"peer", 1 - rank}, {"shape", std::vector<int64_t>{4}},
                                    {"dtype", ir::DataType::kFloat32}, {"tag", rank + 1}});
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(b.Create("c_send", {*got}, {{"peer", 1 - rank}, {"tag", 2 - rank}}).ok());
  }
  const std::vector<ir::PipelineJob> one = {{.kind = ir::JobKind::kForward}};
  const absl::Status s = CheckMessageOrder({{.rank = 0, .program = &programs[0], .jobs = one},
                                            {.rank = 1, .program = &programs[1], .jobs = one}});
  EXPECT_THAT(s.message(), HasSubstr("deadlock: rank 0 waits for tag 1 (micro-batch 0, job F0, op #0) from rank 1; "
                                     "rank 1 waits for tag 2 (micro-batch 0, job F0, op #0) from rank 0"));
}

}  // namespace
}  // namespace pdist::engine
