// Pipelined training equals single-rank training: GPT and LLaMA cut into stages, run with each
// schedule over micro-batches (alone and with data, tensor and sequence parallelism), 10 AdamW
// steps on the same global batches as one rank: float32 (1e-5) and float64 (1e-10).
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "tests/engine/distributed_test_util.h"

namespace pdist::engine {
namespace {

using testing::ExpectSameTraining;
using testing::RunOutcome;
using testing::TrainSteps;

constexpr int64_t kSteps = 10;
constexpr int64_t kLayers = 4;  // enough places to cut for 4 stages, or 2 stages × 2 chunks
constexpr int64_t kBatch = 8;   // 4 micro-batches of 2, each split over dp 2

struct Case {
  std::string name;
  std::string model;  // gpt | gpt_tied | llama
  std::string strategy;
  ir::DataType dtype;
  std::string backend = "inproc";  // inproc-rendezvous: point to point as NCCL's
};

std::string CaseName(const ::testing::TestParamInfo<Case>& info) { return info.param.name; }
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

ir::Program BuildModel(const Case& c) {
  if (c.model == "gpt_tied") {
    auto cfg = testing::SmallConfig<ir::models::GptConfig>(c.dtype, kLayers, kBatch);
    cfg.tied_embeddings = true;
    return *ir::models::BuildGpt(cfg);
  }
  return testing::BuildSmallModel(c.model, c.dtype, kLayers, kBatch);
}

// {"pp_degree": 2, "pipeline": {"schedule_mode": "1F1B", "accumulate_steps": 4}, ...extra}
// `pipeline_extra` goes into the pipeline section, `extra` after it.
std::string Pipeline(int64_t pp, const std::string& schedule, const std::string& extra = "", int64_t vpp = 1,
                     const std::string& pipeline_extra = "") {
  return absl::StrCat(R"({"pp_degree": )", pp, R"(, "pipeline": {"enable": true, "schedule_mode": ")", schedule,
                      R"(", "accumulate_steps": 4, "vpp_degree": )", vpp, pipeline_extra, "}", extra, "}");
}

class PipelineEquivalenceTest : public ::testing::TestWithParam<Case> {};

TEST_P(PipelineEquivalenceTest, MatchesSingleRank) {
  const Case& c = GetParam();
  const ir::Program model = BuildModel(c);
  const RunOutcome single = TrainSteps(model.Clone(), testing::EquivalenceOptions(), kSteps, testing::kSmallVocab);
  EngineOptions o = testing::EquivalenceOptions();
  o.strategy_json = c.strategy;
  o.backend = c.backend;
  const RunOutcome pipelined = TrainSteps(model.Clone(), o, kSteps, testing::kSmallVocab);
  const bool f64 = c.dtype == ir::DataType::kFloat64;
  const bool gpt = c.model != "llama";
  ExpectSameTraining(pipelined, single, model, f64 ? 1e-10 : 1e-5,
                     f64 || !gpt ? testing::ElementMask{} : testing::KeyBiasElements(model, testing::kSmallHeads));
}

std::vector<Case> Cases() {
  struct Strategy {
    std::string name, json;
    bool llama;  // also run LLaMA (the GPT list covers every combination)
  };
  const std::vector<Strategy> strategies = {
      {"acc4", Pipeline(1, "1F1B"), false},
      {"pp2_FThenB", Pipeline(2, "FThenB"), false},
      {"pp2_1F1B", Pipeline(2, "1F1B"), true},
      {"pp2_ZBH1", Pipeline(2, "ZBH1"), false},
      {"pp4_FThenB", Pipeline(4, "FThenB"), false},
      {"pp4_1F1B", Pipeline(4, "1F1B"), true},
      {"pp4_ZBH1", Pipeline(4, "ZBH1"), false},
      {"pp2_vpp2", Pipeline(2, "VPP", "", 2), true},
      {"pp4_vpp2", Pipeline(4, "VPP", "", 2), false},
      {"pp2_marked", Pipeline(2, "1F1B", "", 1, R"(, "split_before": ["gpt.h.3.*"])"), false},
      {"pp2_dp2", Pipeline(2, "1F1B", R"(, "dp_degree": 2)"), false},
      // The gradient all-reduce starts in the last micro-batch's backward (B, or W under ZBH1).
      {"acc4_dp2", Pipeline(1, "1F1B", R"(, "dp_degree": 2)"), false},
      {"pp2_ZBH1_dp2", Pipeline(2, "ZBH1", R"(, "dp_degree": 2)"), false},
      {"pp2_vpp2_dp2", Pipeline(2, "VPP", R"(, "dp_degree": 2)", 2), false},
      {"pp2_mp2", Pipeline(2, "1F1B", R"(, "mp_degree": 2)"), false},
      {"pp2_mp2_sp", Pipeline(2, "1F1B", R"(, "mp_degree": 2, "sp": true)"), false},
      {"pp2_mp2_dp2", Pipeline(2, "1F1B", R"(, "mp_degree": 2, "dp_degree": 2)"), true},
  };
  std::vector<Case> cases;
  for (const auto& [dtype, suffix] : {std::pair{ir::DataType::kFloat32, "f32"}, std::pair{ir::DataType::kFloat64, "f64"}}) {
    for (const Strategy& s : strategies) {
      cases.push_back({absl::StrCat("gpt_", s.name, "_", suffix), "gpt", s.json, dtype});
      if (s.llama) cases.push_back({absl::StrCat("llama_", s.name, "_", suffix), "llama", s.json, dtype});
    }
    // Every schedule again with NCCL's point to point (each send held until its receive runs,
    // messages matched in issue order): no deadlock, every message where it belongs. f64 only:
    // the same steps, compared at 1e-10.
    if (dtype == ir::DataType::kFloat64) {
      for (const Strategy& s : strategies) {
        if (absl::StrContains(s.json, R"("pp_degree": 1)")) continue;  // no sends
        cases.push_back({absl::StrCat("gpt_", s.name, "_rendezvous"), "gpt", s.json, dtype, "inproc-rendezvous"});
      }
      cases.push_back({"gpt_tied_pp2_dp2_rendezvous", "gpt_tied", Pipeline(2, "1F1B", R"(, "dp_degree": 2)"), dtype,
                       "inproc-rendezvous"});
      // The head's share of the table's gradient is summed over the micro-batches and sent once,
      // in the optimizer job; at pp 4 the table goes to a stage that is not the next, on a lane
      // of its own.
      cases.push_back({"gpt_tied_pp2_vpp2_rendezvous", "gpt_tied", Pipeline(2, "VPP", "", 2), dtype, "inproc-rendezvous"});
      cases.push_back({"gpt_tied_pp4_vpp2_rendezvous", "gpt_tied", Pipeline(4, "VPP", "", 2), dtype, "inproc-rendezvous"});
      cases.push_back({"gpt_tied_pp4_ZBH1_rendezvous", "gpt_tied", Pipeline(4, "ZBH1"), dtype, "inproc-rendezvous"});
    }
    cases.push_back({absl::StrCat("gpt_tied_pp2_1F1B_", suffix), "gpt_tied", Pipeline(2, "1F1B"), dtype});
    cases.push_back({absl::StrCat("gpt_tied_pp2_dp2_", suffix), "gpt_tied", Pipeline(2, "1F1B", R"(, "dp_degree": 2)"), dtype});
    cases.push_back({absl::StrCat("gpt_tied_pp2_vpp2_dp2_", suffix), "gpt_tied", Pipeline(2, "VPP", R"(, "dp_degree": 2)", 2), dtype});
    // The last stage's copy of the tied weight comes by a send: recompute keeps it, never re-sends.
    cases.push_back({absl::StrCat("gpt_tied_pp2_rc_full_", suffix), "gpt_tied",
                     Pipeline(2, "1F1B", R"(, "recompute": {"enable": true, "granularity": "full"})"), dtype});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Strategies, PipelineEquivalenceTest, ::testing::ValuesIn(Cases()), CaseName);

}  // namespace
}  // namespace pdist::engine
