// Splitting the weight gradients for ZBH1 changes which job runs a product, never what a rank
// communicates or stores: each rank's local program of a pipelined GPT under mp 2 (with and
// without sp, f32 and bf16) holds the same collectives, parameters, states and gradients under
// ZBH1 as under 1F1B. Before the split ran after completion, ZBH1 with sp all-gathered the MLP
// weights in the backward and kept their gradients and Adam states whole (3.3x the gradient
// memory in the planner's profile).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "ir/models/gpt.h"
#include "ir/op_def.h"
#include "passes/distributed_programs.h"

namespace pdist::passes {
namespace {

struct RankProgram {
  std::map<std::string, int> collectives;  // "c_allgather f32[1,32,64]" → count
  std::map<std::string, std::string> arguments;  // name → local type (parameters, states)
  std::map<std::string, std::string> gradients;  // parameter → local gradient type
  int weight_ops = 0;                            // ops in backward_weight
};

RankProgram Build(const std::string& schedule, bool sp, bool bf16, int64_t rank) {
  ir::models::GptConfig cfg;
  cfg.vocab = 64;
  cfg.hidden = 32;
  cfg.layers = 2;
  cfg.heads = 4;
  cfg.seq_len = 16;
  cfg.batch = 2;
  absl::StatusOr<ir::Program> forward = ir::models::BuildGpt(cfg);
  EXPECT_TRUE(forward.ok()) << forward.status();
  strategy::Strategy s;
  s.mp_degree = 2;
  s.pp_degree = 2;
  s.sp = sp;
  s.pipeline.enable = true;
  s.pipeline.schedule_mode = schedule;
  s.pipeline.accumulate_steps = 2;
  s.pipeline.micro_batch_size = 1;
  if (bf16) {
    s.amp.enable = true;
    s.amp.dtype = "bfloat16";
    s.amp.level = "o2";
  }
  absl::StatusOr<DistributedPrograms> programs = BuildDistributedPrograms(*forward, s, OptimizerConfig{});
  EXPECT_TRUE(programs.ok()) << programs.status();
  ReshardPlanCache plans;
  absl::StatusOr<ir::Program> local = LocalProgram(programs->train, RankPipeline(rank, std::nullopt), plans);
  EXPECT_TRUE(local.ok()) << local.status();
  RankProgram out;
  for (const auto& op : local->block().ops()) {
    if (op->role() == ir::OpRole::kBackwardWeight) ++out.weight_ops;
    const ir::OpDef* def = ir::OpRegistry::Global().Find(op->type());
    if (def == nullptr || def->collective == ir::CollectiveKind::kNone) continue;
    std::string key = op->type();
    for (const ir::Value* v : op->operands()) absl::StrAppend(&key, " ", v->type().ToString());
    ++out.collectives[key];
  }
  for (const ir::Value* a : local->block().arguments()) {
    if (!a->name().empty()) out.arguments[a->name()] = a->type().ToString();
  }
  for (const ir::StateUpdate& g : local->gradients()) out.gradients[g.state->name()] = g.new_value->type().ToString();
  return out;
}

TEST(SplitWeightGradientsTest, ZeroBubbleCommunicatesAndStoresWhatOneFOneBDoes) {
  for (bool sp : {false, true}) {
    for (bool bf16 : {false, true}) {
      for (int64_t rank : {0, 2}) {  // both stages' first tensor-parallel rank
        SCOPED_TRACE(absl::StrCat("sp ", sp, " bf16 ", bf16, " rank ", rank));
        const RankProgram zb = Build("ZBH1", sp, bf16, rank), one = Build("1F1B", sp, bf16, rank);
        EXPECT_GT(zb.weight_ops, 0);
        EXPECT_EQ(one.weight_ops, 0);
        EXPECT_EQ(zb.collectives, one.collectives);
        EXPECT_EQ(zb.arguments, one.arguments);
        EXPECT_EQ(zb.gradients, one.gradients);
      }
    }
  }
}

}  // namespace
}  // namespace pdist::passes
