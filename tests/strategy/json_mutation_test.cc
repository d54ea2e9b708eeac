// Mutation fuzzing of the JSON readers a user feeds by hand (cluster files, strategy files):
// thousands of byte flips, insertions, deletions and truncations of valid files must each come
// back as a value or an InvalidArgument error with a message — never a crash, an exception or
// another error code. (libFuzzer targets need clang; this runs in every build.)
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "strategy/cluster.h"
#include "strategy/strategy.h"

namespace pdist::strategy {
namespace {

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : state_(seed) {}
  std::string Mutate(std::string s) {
    const int edits = 1 + static_cast<int>(Next() % 4);
    for (int i = 0; i < edits && !s.empty(); ++i) {
      const size_t at = Next() % s.size();
      static const std::string kBytes = "{}[]\":,-.0123456789eE truefalsnul\\\x01\xff";
      switch (Next() % 4) {
        case 0: s[at] = kBytes[Next() % kBytes.size()]; break;
        case 1: s.insert(at, 1, kBytes[Next() % kBytes.size()]); break;
        case 2: s.erase(at, 1 + Next() % 8); break;
        case 3: s.resize(at); break;
      }
    }
    return s;
  }

 private:
  uint64_t Next() {
    state_ = state_ * 6364136223846793005ull + 1442695040888963407ull;
    return state_ >> 33;
  }
  uint64_t state_;
};

template <typename Parse>
void ExpectValueOrInvalidArgument(const std::string& valid, Parse parse) {
  ASSERT_TRUE(parse(valid).ok());
  Mutator mutator(42);
  int errors = 0;
  for (int i = 0; i < 3000; ++i) {
    const std::string text = mutator.Mutate(valid);
    const auto result = parse(text);
    if (result.ok()) continue;
    ++errors;
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument) << text << "\n" << result.status();
    EXPECT_FALSE(result.status().message().empty());
  }
  EXPECT_GT(errors, 1000);  // the mutations do break the files
}

TEST(JsonMutationTest, ClusterFiles) {
  Cluster c = *ClusterPreset("dgx-a100", 16);
  c.shared_cores = 2;
  c.shared_cores_efficiency = 0.7;
  c.device.efficiency.op_scale = {{"matmul", 1.5}, {"add_grad", 3}};
  ExpectValueOrInvalidArgument(ClusterToJson(c), [](const std::string& t) { return ParseCluster(t); });
}

TEST(JsonMutationTest, StrategyFiles) {
  const std::string valid = R"json({"dp_degree": 2, "mp_degree": 2, "pp_degree": 2, "sp": true,
      "sharding": {"enable": true, "stage": 2, "degree": 2},
      "pipeline": {"enable": true, "schedule_mode": "VPP", "accumulate_steps": 4, "vpp_degree": 2,
                   "split_before": ["gpt.h.1.*", "gpt.h.2.*", "gpt.h.3.*"]},
      "recompute": {"enable": true, "granularity": "selective"},
      "annotations": [{"tensor": "tokens", "mesh": {"shape": [2, 2], "dim_names": ["dp", "mp"]},
                       "placements": ["Shard(0)", "Replicate()"]}]})json";
  ExpectValueOrInvalidArgument(valid, [](const std::string& t) { return ParseStrategy(t); });
}

}  // namespace
}  // namespace pdist::strategy
