// FixedChoicesFromStrategyJson (pdist-plan --strategy): the keys a strategy sets are kept as the
// search's fixed choices, the rest left to it; keys the search has no choice for are refused by
// name rather than dropped (a dropped key made a plan other than the one asked for, and -o
// wrote the planner's value in its place).
#include "planner/fixed_choices.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace pdist::planner {
namespace {

using ::testing::HasSubstr;

TEST(FixedChoicesTest, KeepsTheKeysGivenAndOnlyThose) {
  absl::StatusOr<FixedChoices> f = FixedChoicesFromStrategyJson(
      R"({"pp_degree": 2, "sharding": {"enable": true, "stage": 2}, "pipeline": {"vpp_degree": 2},
          "recompute": {"enable": true, "granularity": "selective"}})");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->pp, 2);
  EXPECT_EQ(f->zero, 2);
  EXPECT_EQ(f->vpp, 2);
  EXPECT_EQ(f->recompute, Recompute::kSelective);
  EXPECT_FALSE(f->dp.has_value());
  EXPECT_FALSE(f->mp.has_value());
  EXPECT_FALSE(f->micro_batches.has_value());
  EXPECT_FALSE(f->schedule.has_value());
  // recompute.segments "layers" is what the planner prices: kept silently.
  EXPECT_TRUE(FixedChoicesFromStrategyJson(R"({"recompute": {"enable": true, "segments": "layers"}})").ok());
}

TEST(FixedChoicesTest, KeysTheSearchCannotKeepAreRefusedByName) {
  auto error = [](const char* json) {
    absl::StatusOr<FixedChoices> f = FixedChoicesFromStrategyJson(json);
    EXPECT_FALSE(f.ok()) << json;
    return f.ok() ? std::string() : std::string(f.status().message());
  };
  EXPECT_THAT(error(R"({"recompute": {"enable": true, "segments": "stages"}})"),
              HasSubstr("'recompute.segments' 'stages' cannot be kept"));
  EXPECT_THAT(error(R"({"amp": {"enable": true, "dtype": "bfloat16"}})"), HasSubstr("does not plan 'amp'"));
  EXPECT_THAT(error(R"({"gradient_merge": {"enable": true, "k_steps": 2}})"),
              HasSubstr("fix the micro-batches with 'pipeline.accumulate_steps'"));
}

// Checks between keys see the keys given: a degree left to the search is not taken as 1.
TEST(FixedChoicesTest, ADegreeLeftOutIsNotCheckedAsOne) {
  absl::StatusOr<FixedChoices> f =
      FixedChoicesFromStrategyJson(R"({"sharding": {"enable": true, "stage": 2, "degree": 2}})");
  ASSERT_TRUE(f.ok()) << f.status();  // was "'sharding.degree' (2) exceeds dp_degree (1)"
  EXPECT_EQ(f->zero_degree, 2);
  EXPECT_FALSE(f->dp.has_value());
  f = FixedChoicesFromStrategyJson(R"({"sp": true})");
  ASSERT_TRUE(f.ok()) << f.status();  // was "'sp' needs mp_degree > 1"
  EXPECT_EQ(f->sp, true);
  EXPECT_FALSE(f->mp.has_value());
  // A degree out of range is named as the key the user wrote, not as the dp_degree it stands in for.
  absl::StatusOr<FixedChoices> zero = FixedChoicesFromStrategyJson(R"({"sharding": {"enable": true, "degree": 0}})");
  ASSERT_FALSE(zero.ok());
  EXPECT_THAT(std::string(zero.status().message()), HasSubstr("'sharding.degree'"));
  // Given, they are checked as given.
  EXPECT_FALSE(FixedChoicesFromStrategyJson(R"({"dp_degree": 1, "sharding": {"enable": true, "degree": 2}})").ok());
  EXPECT_FALSE(FixedChoicesFromStrategyJson(R"({"mp_degree": 1, "sp": true})").ok());
  // The interleaved schedule without its degree: the search's (it tries 2 and up).
  f = FixedChoicesFromStrategyJson(R"({"pipeline": {"schedule_mode": "VPP"}})");
  ASSERT_TRUE(f.ok()) << f.status();  // was "'pipeline.vpp_degree' must be >= 2 for schedule_mode VPP"
  EXPECT_FALSE(f->vpp.has_value());
  EXPECT_FALSE(FixedChoicesFromStrategyJson(R"({"pipeline": {"schedule_mode": "VPP", "vpp_degree": 1}})").ok());
  // ZeRO on, its stage the search's (2 or 3 for accumulated shards); recompute on, its granularity the search's.
  f = FixedChoicesFromStrategyJson(R"({"sharding": {"enable": true, "accumulate_shards": true}, "recompute": {"enable": true}})");
  ASSERT_TRUE(f.ok()) << f.status();  // was "needs stage 2 or 3": enable alone pinned stage 1
  EXPECT_EQ(f->sharded, true);
  EXPECT_FALSE(f->zero.has_value());
  EXPECT_EQ(f->recomputed, true);
  EXPECT_FALSE(f->recompute.has_value());
  f = FixedChoicesFromStrategyJson(R"({"sharding": {"enable": false}, "recompute": {"enable": false}})");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->zero, 0);
  EXPECT_EQ(f->recompute, Recompute::kNone);
}

// A key that a strategy without its section's "enable" leaves unused is refused, not dropped (the
// plan was made without it and -o wrote "enable": false); an empty stage cut is no cut.
TEST(FixedChoicesTest, KeysOfASectionThatIsNotOnAreRefusedWithTheFix) {
  for (const char* json : {R"({"sharding": {"stage": 2}})", R"({"sharding": {"degree": 4}})",
                           R"({"sharding": {"accumulate_shards": true}})",
                           R"({"recompute": {"granularity": "selective"}})"}) {
    absl::StatusOr<FixedChoices> f = FixedChoicesFromStrategyJson(json);
    ASSERT_FALSE(f.ok()) << json;
    EXPECT_THAT(std::string(f.status().message()), HasSubstr("add \"enable\": true")) << json;
  }
  for (const char* json : {R"({"sharding": {"enable": false, "stage": 3}})",
                           R"({"sharding": {"enable": false, "degree": 4}})",
                           R"({"recompute": {"enable": false, "granularity": "selective"}})"}) {
    absl::StatusOr<FixedChoices> f = FixedChoicesFromStrategyJson(json);
    ASSERT_FALSE(f.ok()) << json;
    EXPECT_THAT(std::string(f.status().message()), HasSubstr("false: the plan has none")) << json;
  }
  // A written strategy's defaults under a disabled section (every -o file of a plan without them).
  EXPECT_TRUE(FixedChoicesFromStrategyJson(
                  R"({"sharding": {"enable": false, "stage": 1, "accumulate_shards": false},
                      "recompute": {"enable": false, "granularity": "full"}})")
                  .ok());
  absl::StatusOr<FixedChoices> f = FixedChoicesFromStrategyJson(R"({"pipeline": {"split_before": []}})");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE(f->split_before.empty());
}

// A stage cut is kept as given (the search checks it against the model): a plan's own -o file
// with a cut reads back (it was refused: "the planner cuts the pipeline itself").
TEST(FixedChoicesTest, AStageCutIsKeptAsGiven) {
  absl::StatusOr<FixedChoices> f =
      FixedChoicesFromStrategyJson(R"({"pp_degree": 2, "pipeline": {"split_before": ["gpt.h.1.*"]}})");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->split_before, std::vector<std::string>{"gpt.h.1.*"});
  EXPECT_EQ(f->pp, 2);
  // The count against both degrees given is the strategy reader's check; against pp alone, the
  // search's (SearchTest.AFixedStageCutIsPricedAsGiven).
  EXPECT_FALSE(FixedChoicesFromStrategyJson(
                   R"({"pp_degree": 2, "pipeline": {"vpp_degree": 1, "split_before": ["a.*", "b.*"]}})")
                   .ok());
}

}  // namespace
}  // namespace pdist::planner
