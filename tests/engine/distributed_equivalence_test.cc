// Distributed training equals single-rank training: GPT and LLaMA under data, tensor and
// sequence parallelism on in-process ranks, 10 AdamW steps, float32 (1e-5) and float64 (1e-10).
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

#include "tests/engine/distributed_test_util.h"

namespace pdist::engine {
namespace {

using testing::ExpectSameTraining;
using testing::RunOutcome;
using testing::TrainSteps;

constexpr int64_t kSteps = 10;
constexpr int64_t kVocab = testing::kSmallVocab;
constexpr int64_t kHeads = testing::kSmallHeads;

struct Case {
  std::string name;
  std::string model;     // gpt | llama
  std::string strategy;  // JSON
  ir::DataType dtype;
};

std::string CaseName(const ::testing::TestParamInfo<Case>& info) { return info.param.name; }
// ctest lists a parameter by this, not by its bytes.
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

ir::Program BuildModel(const Case& c) { return testing::BuildSmallModel(c.model, c.dtype); }
EngineOptions Options() { return testing::EquivalenceOptions(); }

class DistributedEquivalenceTest : public ::testing::TestWithParam<Case> {};

TEST_P(DistributedEquivalenceTest, MatchesSingleRank) {
  const Case& c = GetParam();
  const ir::Program model = BuildModel(c);
  const RunOutcome single = TrainSteps(model.Clone(), Options(), kSteps, kVocab);
  EngineOptions o = Options();
  o.strategy_json = c.strategy;
  const RunOutcome distributed = TrainSteps(model.Clone(), o, kSteps, kVocab);
  const bool f64 = c.dtype == ir::DataType::kFloat64;
  ExpectSameTraining(distributed, single, model, f64 ? 1e-10 : 1e-5,
                     f64 ? testing::ElementMask{} : testing::KeyBiasElements(model, kHeads));
}

std::vector<Case> Cases() {
  const std::vector<std::pair<std::string, std::string>> strategies = {
      {"dp2", R"({"dp_degree": 2})"},
      {"dp4", R"({"dp_degree": 4})"},
      {"mp2", R"({"mp_degree": 2})"},
      {"mp4", R"({"mp_degree": 4})"},
      {"mp2_sp", R"({"mp_degree": 2, "sp": true})"},
      {"dp2_mp2", R"({"dp_degree": 2, "mp_degree": 2})"},
      {"dp2_mp2_sp", R"({"dp_degree": 2, "mp_degree": 2, "sp": true})"},
  };
  std::vector<Case> cases;
  for (const char* model : {"gpt", "llama"}) {
    for (const auto& [name, json] : strategies) {
      for (ir::DataType dtype : {ir::DataType::kFloat32, ir::DataType::kFloat64}) {
        cases.push_back({absl::StrCat(model, "_", name, dtype == ir::DataType::kFloat32 ? "_f32" : "_f64"), model,
                         json, dtype});
      }
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Strategies, DistributedEquivalenceTest, ::testing::ValuesIn(Cases()), CaseName);

}  // namespace
}  // namespace pdist::engine
