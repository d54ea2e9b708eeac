// Strategy JSON: defaults, Paddle's section/key names, and errors that name the key.
#include "strategy/strategy.h"

#include <gtest/gtest.h>

namespace pdist::strategy {
namespace {

std::string ErrorOf(const std::string& json) {
  absl::StatusOr<Strategy> s = ParseStrategy(json);
  EXPECT_FALSE(s.ok()) << json;
  return s.ok() ? "" : std::string(s.status().message());
}

TEST(StrategyTest, EmptyObjectIsSingleRankDefault) {
  absl::StatusOr<Strategy> s = ParseStrategy("{}");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->WorldSize(), 1);
  EXPECT_EQ(s->pipeline.schedule_mode, "1F1B");
  EXPECT_EQ(s->sharding.stage, 1);
}

TEST(StrategyTest, ReadsEverySection) {
  absl::StatusOr<Strategy> s = ParseStrategy(R"({
    "dp_degree": 2, "mp_degree": 4, "pp_degree": 2, "sp": true,
    "sharding": {"enable": true, "stage": 3, "degree": 2, "accumulate_shards": true},
    "pipeline": {"enable": true, "schedule_mode": "VPP", "accumulate_steps": 8, "micro_batch_size": 2, "vpp_degree": 2},
    "recompute": {"enable": true},
    "amp": {"enable": true, "dtype": "bfloat16", "level": "o2"},
    "gradient_merge": {"enable": true, "k_steps": 8, "avg": false}})");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->WorldSize(), 16);
  EXPECT_TRUE(s->sp);
  EXPECT_EQ(s->sharding.stage, 3);
  EXPECT_TRUE(s->sharding.accumulate_shards);
  EXPECT_EQ(s->pipeline.schedule_mode, "VPP");
  EXPECT_EQ(s->pipeline.accumulate_steps, 8);
  EXPECT_EQ(s->amp.dtype, "bfloat16");
  EXPECT_EQ(s->gradient_merge.k_steps, 8);
  EXPECT_EQ(s->MicroBatches(), 8);
  EXPECT_FALSE(s->gradient_merge.avg);
  // Written JSON reads back to the same strategy.
  absl::StatusOr<Strategy> again = ParseStrategy(StrategyToJson(*s));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(StrategyToJson(*again), StrategyToJson(*s));
}

TEST(StrategyTest, GradientMergeIsTheMicroBatchCountWithoutAPipeline) {
  absl::StatusOr<Strategy> s = ParseStrategy(R"({"dp_degree": 2, "gradient_merge": {"enable": true, "k_steps": 4}})");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->MicroBatches(), 4);
  EXPECT_TRUE(s->MicroBatched());
  EXPECT_NE(ErrorOf(R"({"pp_degree": 2, "pipeline": {"accumulate_steps": 2}, "gradient_merge": {"enable": true, "k_steps": 4}})")
                .find("'gradient_merge.k_steps' (4) with a pipeline"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"dp_degree": 4, "sharding": {"enable": true, "degree": 3}})").find("'sharding.degree' (3) does not divide dp_degree (4)"),
            std::string::npos);
}

TEST(StrategyTest, AmpCustomOpListsNameRealOpsOnce) {
  absl::StatusOr<Strategy> s = ParseStrategy(
      R"({"amp": {"enable": true, "custom_white_list": ["softmax"], "custom_black_list": ["matmul", "gelu"]}})");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->amp.custom_white_list, std::vector<std::string>{"softmax"});
  EXPECT_EQ(s->amp.custom_black_list, (std::vector<std::string>{"matmul", "gelu"}));
  absl::StatusOr<Strategy> again = ParseStrategy(StrategyToJson(*s));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->amp.custom_black_list, s->amp.custom_black_list);
  EXPECT_NE(ErrorOf(R"({"amp": {"custom_white_list": ["softmx"]}})")
                .find("'amp.custom_white_list[0]' is \"softmx\", which is not a pdist op type"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"amp": {"custom_white_list": ["gelu"], "custom_black_list": ["gelu"]}})")
                .find("both name 'gelu': an op runs in one precision"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"amp": {"custom_black_list": "matmul"}})").find("'amp.custom_black_list' must be a list"),
            std::string::npos);
}

TEST(StrategyTest, AmpReadsPaddlesLossScalingKeys) {
  absl::StatusOr<Strategy> s = ParseStrategy(R"({"amp": {"enable": true, "dtype": "float16", "level": "o2",
      "init_loss_scaling": 1024, "incr_every_n_steps": 500, "decr_every_n_nan_or_inf": 1, "incr_ratio": 4.0,
      "decr_ratio": 0.25}})");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->amp.init_loss_scaling, 1024.0);
  EXPECT_EQ(s->amp.incr_every_n_steps, 500);
  EXPECT_EQ(s->amp.decr_every_n_nan_or_inf, 1);
  EXPECT_EQ(s->amp.incr_ratio, 4.0);
  EXPECT_EQ(s->amp.decr_ratio, 0.25);
  EXPECT_TRUE(s->amp.ScalesLoss());
  absl::StatusOr<Strategy> again = ParseStrategy(StrategyToJson(*s));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(StrategyToJson(*again), StrategyToJson(*s));
  // bfloat16 has f32's exponent range: no loss scaling.
  absl::StatusOr<Strategy> bf16 = ParseStrategy(R"({"amp": {"enable": true, "dtype": "bfloat16"}})");
  ASSERT_TRUE(bf16.ok());
  EXPECT_FALSE(bf16->amp.ScalesLoss());
  EXPECT_NE(ErrorOf(R"({"amp": {"decr_ratio": 1.5}})").find("'amp.decr_ratio' must be in [0, 1], got 1.5"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"amp": {"decr_ratio": 0}})").find("'amp.decr_ratio' (0) in (0, 1)"), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"amp": {"incr_ratio": 1}})").find("'amp.incr_ratio' (1) must be > 1"), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"amp": {"init_loss_scaling": "big"}})").find("'amp.init_loss_scaling' must be a number"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"amp": {"incr_every_n_steps": 0}})").find("'amp.incr_every_n_steps' must be in [1, "),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"amp": {"use_dynamic_loss_scalin": true}})").find("'amp.use_dynamic_loss_scalin'"),
            std::string::npos);
}

TEST(StrategyTest, ErrorsNameTheKey) {
  EXPECT_NE(ErrorOf(R"({"dp_degre": 2})").find("unknown strategy key 'dp_degre'"), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"pipeline": {"shedule_mode": "1F1B"}})").find("'pipeline.shedule_mode'"), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"dp_degree": "2"})").find("'dp_degree' must be an integer"), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"dp_degree": 0})").find("'dp_degree' must be in [1, 1048576], got 0"), std::string::npos);
  // Sizes are bounded before anything is allocated for them.
  EXPECT_NE(ErrorOf(R"({"dp_degree": 4294967298})").find("'dp_degree' must be in [1, 1048576], got 4294967298"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"dp_degree": 18446744073709551615})").find("must be in [1, 1048576]"), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"dp_degree": 1024, "mp_degree": 1024, "pp_degree": 2})")
                .find("dp_degree × mp_degree × pp_degree = 1024 × 1024 × 2 is more than 1048576"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"dp_degree": 2, "dp_degree": 2})").find("duplicate key 'dp_degree'"), std::string::npos);
  EXPECT_NE(ErrorOf(R"json({"annotations": [{"tensor": "w", "mesh": {"shape": [1], "process_ids": [4294967296]},
                             "placements": ["Replicate()"]}]})json")
                .find("process id 4294967296 is beyond the largest job pdist runs"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"pipeline": {"schedule_mode": "2F2B"}})").find("\"2F2B\""), std::string::npos);
  const std::string segments = ErrorOf(R"({"recompute": {"enable": true, "segments": "halves"}})");
  EXPECT_NE(segments.find("recompute.segments"), std::string::npos) << segments;
  EXPECT_NE(segments.find("halves"), std::string::npos) << segments;
  EXPECT_NE(ErrorOf(R"({"sharding": {"stage": 4}})").find("'sharding.stage'"), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"dp_degree": 2, "sharding": {"enable": true, "accumulate_shards": true}})")
                .find("'sharding.accumulate_shards' needs stage 2 or 3"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"dp_degree": 2, "sharding": {"enable": true, "stage": 2, "accumulate_shards": true},
                        "amp": {"enable": true, "dtype": "float16"}})")
                .find("does not work with float16 dynamic loss scaling"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"sp": true})").find("mp_degree"), std::string::npos);
  EXPECT_NE(ErrorOf("[1, 2]").find("must be a JSON object"), std::string::npos);
  EXPECT_NE(ErrorOf("{").find("not valid JSON"), std::string::npos);
  EXPECT_NE(ErrorOf("").find("not valid JSON"), std::string::npos);  // an empty file is no strategy
  // A section's keys without its "enable" were unused without a word (ZeRO-3 asked, none run).
  for (const char* json : {R"({"dp_degree": 2, "sharding": {"stage": 3}})", R"({"recompute": {"granularity": "full"}})",
                           R"({"amp": {"dtype": "bfloat16"}})", R"({"gradient_merge": {"k_steps": 2}})"}) {
    EXPECT_NE(ErrorOf(json).find("without '"), std::string::npos) << json;
    EXPECT_NE(ErrorOf(json).find("add \"enable\": true"), std::string::npos) << json;
  }
  EXPECT_NE(ErrorOf(R"({"sharding": {"stage": 2}})").find("'sharding.stage' without 'sharding.enable'"),
            std::string::npos);
  // Off said in so many words, or an empty section: the keys are unused, as Paddle reads them.
  EXPECT_TRUE(ParseStrategy(R"({"dp_degree": 2, "sharding": {"enable": false, "stage": 3}})").ok());
  EXPECT_TRUE(ParseStrategy(R"({"amp": {}})").ok());
}

}  // namespace
}  // namespace pdist::strategy

namespace pdist::strategy {
namespace {

TEST(StrategyTest, SplitBeforeMarksOneStartPerStageAfterTheFirst) {
  auto s = ParseStrategy(R"({"pp_degree": 2, "pipeline": {"split_before": ["gpt.h.3.*"]}})");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->pipeline.split_before, (std::vector<std::string>{"gpt.h.3.*"}));
  auto back = ParseStrategy(StrategyToJson(*s));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->pipeline.split_before, s->pipeline.split_before);

  auto too_few = ParseStrategy(R"({"pp_degree": 2, "pipeline": {"vpp_degree": 2, "schedule_mode": "VPP",
                                   "split_before": ["gpt.h.3.*"]}})");
  ASSERT_FALSE(too_few.ok());
  EXPECT_NE(too_few.status().message().find("has 1 entries; pp_degree × vpp_degree = 4 stages need 3"),
            std::string::npos) << too_few.status();
  auto not_string = ParseStrategy(R"({"pp_degree": 2, "pipeline": {"split_before": [3]}})");
  ASSERT_FALSE(not_string.ok());
  EXPECT_NE(not_string.status().message().find("pipeline.split_before[0]"), std::string::npos) << not_string.status();
}

TEST(StrategyTest, GivenKeysOnlyChecksPairsWhoseKeysAreAllGiven) {
  // To run, an absent key is its default; as choices fixed for the planner, it is the search's.
  const std::vector<std::string> partial = {R"({"sp": true})", R"({"sharding": {"enable": true, "degree": 4}})",
                                            R"({"pipeline": {"schedule_mode": "VPP"}})",
                                            R"({"sharding": {"enable": true, "accumulate_shards": true}})",
                                            R"({"pipeline": {"split_before": ["gpt.h.2.*"]}})"};
  for (const std::string& json : partial) {
    EXPECT_FALSE(ParseStrategy(json).ok()) << json;
    absl::StatusOr<Strategy> given = ParseStrategy(json, StrategyKeys::kGivenOnly);
    EXPECT_TRUE(given.ok()) << json << ": " << given.status();
  }
  // Given, each pair is checked; single keys are checked either way.
  for (const std::string& json :
       {R"({"mp_degree": 1, "sp": true})", R"({"dp_degree": 2, "sharding": {"enable": true, "degree": 4}})",
        R"({"dp_degree": 6, "sharding": {"enable": true, "degree": 4}})",
        R"({"pipeline": {"schedule_mode": "VPP", "vpp_degree": 1}})",
        R"({"sharding": {"enable": true, "stage": 1, "accumulate_shards": true}})", R"({"sharding": {"degree": 0}})",
        R"({"dp_degree": 2048, "mp_degree": 2048})"}) {
    EXPECT_FALSE(ParseStrategy(json, StrategyKeys::kGivenOnly).ok()) << json;
  }
}

}  // namespace
}  // namespace pdist::strategy
