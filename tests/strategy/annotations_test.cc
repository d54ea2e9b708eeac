// Strategy "annotations": per-tensor placements read from JSON, written back, errors by key path.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "strategy/strategy.h"

namespace pdist::strategy {
namespace {

using ::testing::HasSubstr;

std::string ErrorOf(const std::string& json) {
  absl::StatusOr<Strategy> s = ParseStrategy(json);
  EXPECT_FALSE(s.ok()) << json;
  return s.ok() ? "" : std::string(s.status().message());
}

// A strategy holding the one annotation `entry`.
std::string With(const std::string& entry) { return R"({"annotations": [)" + entry + "]}"; }

TEST(AnnotationsTest, ReadsMeshAndPlacements) {
  absl::StatusOr<Strategy> s = ParseStrategy(R"j({"dp_degree": 2, "mp_degree": 2, "annotations": [
    {"tensor": "gpt.h.*.attn.qkv.weight", "mesh": {"shape": [2, 2], "dim_names": ["dp", "mp"]},
     "placements": ["Replicate()", "Shard(1)"]},
    {"tensor": "tokens", "mesh": {"shape": [2], "process_ids": [3, 1]}, "placements": ["S(0)"]}]})j");
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->annotations.size(), 2u);
  const TensorAnnotation& qkv = s->annotations[0];
  EXPECT_EQ(qkv.tensor, "gpt.h.*.attn.qkv.weight");
  EXPECT_EQ(qkv.mesh.ToString(), "[2,2] [dp,mp]");
  EXPECT_EQ(qkv.placements, std::vector<ir::Placement>({ir::Placement::Replicate(), ir::Placement::Shard(1)}));
  EXPECT_EQ(s->annotations[1].mesh.ToString(), "[2] [d0] ids [3,1]");
  EXPECT_EQ(s->annotations[1].placements, std::vector<ir::Placement>({ir::Placement::Shard(0)}));
}

TEST(AnnotationsTest, WrittenJsonReadsBack) {
  absl::StatusOr<Strategy> s = ParseStrategy(With(
      R"j({"tensor": "w*", "mesh": {"shape": [2, 2], "dim_names": ["x", "y"], "process_ids": [4, 5, 6, 7]},
          "placements": ["Partial(avg)", "Shard(0)"]})j"));
  ASSERT_TRUE(s.ok()) << s.status();
  const std::string json = StrategyToJson(*s);
  EXPECT_THAT(json, HasSubstr("\"Partial(avg)\""));
  EXPECT_THAT(json, HasSubstr("\"process_ids\""));
  absl::StatusOr<Strategy> again = ParseStrategy(json);
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << json;
  EXPECT_EQ(again->annotations, s->annotations);
  EXPECT_EQ(StrategyToJson(*again), json);
  // Default ids are left out of the written form.
  absl::StatusOr<Strategy> plain = ParseStrategy(With(R"({"tensor": "w", "mesh": {"shape": [2]}, "placements": ["R"]})"));
  ASSERT_TRUE(plain.ok());
  EXPECT_THAT(StrategyToJson(*plain), ::testing::Not(HasSubstr("process_ids")));
  EXPECT_TRUE(ParseStrategy("{}")->annotations.empty());
}

TEST(AnnotationsTest, ErrorsNameTheKeyPath) {
  const std::string mesh = R"("mesh": {"shape": [2, 2]})";
  EXPECT_THAT(ErrorOf(With(R"({"tensor": "w", )" + mesh + R"j(, "placements": ["R", "Shard(x)"]})j")),
              HasSubstr("strategy key 'annotations[0].placements[1]' is invalid: placement 'Shard(x)': the tensor dim must be an integer"));
  EXPECT_THAT(ErrorOf(With(R"({"tensor": "w", )" + mesh + R"(, "placements": ["R", 1]})")),
              HasSubstr("'annotations[0].placements[1]' must be a string, got 1"));
  EXPECT_THAT(ErrorOf(With(R"({"tensor": "w", )" + mesh + R"(, "placements": ["R"]})")),
              HasSubstr("'annotations[0].placements' has 1 entries for the 2-d mesh [2,2] [d0,d1]"));
  EXPECT_THAT(ErrorOf(With(R"({"tensor": "w", )" + mesh + "}")), HasSubstr("'annotations[0].placements' is missing"));
  EXPECT_THAT(ErrorOf(With(R"({"mesh": {"shape": [2]}, "placements": ["R"]})")), HasSubstr("'annotations[0].tensor' is missing"));
  EXPECT_THAT(ErrorOf(With(R"({"tensor": "", "mesh": {"shape": [2]}, "placements": ["R"]})")),
              HasSubstr("'annotations[0].tensor' is empty"));
  EXPECT_THAT(ErrorOf(With(R"({"tensor": "w", "mesh": {"shape": [2, "2"]}, "placements": ["R", "R"]})")),
              HasSubstr("'annotations[0].mesh.shape[1]' must be an integer"));
  EXPECT_THAT(ErrorOf(With(R"({"tensor": "w", "mesh": {"dim_names": ["x"]}, "placements": ["R"]})")),
              HasSubstr("'annotations[0].mesh.shape' is missing"));
  EXPECT_THAT(ErrorOf(With(R"({"tensor": "w", "mesh": {"shape": [2], "process_ids": [0, 0]}, "placements": ["R"]})")),
              HasSubstr("'annotations[0].mesh' is invalid: process mesh [2]: process id 0 appears twice"));
  EXPECT_THAT(ErrorOf(With(R"({"tensor": "w", "mesh": {"shape": [2], "dim_name": ["x"]}, "placements": ["R"]})")),
              HasSubstr("unknown strategy key 'annotations[0].mesh.dim_name'"));
  EXPECT_THAT(ErrorOf(With(R"({"tensor": "w", "mesh": {"shape": [2]}, "placements": ["R"], "extra": 1})")),
              HasSubstr("unknown strategy key 'annotations[0].extra'"));
  EXPECT_THAT(ErrorOf(R"({"annotations": {"tensor": "w"}})"), HasSubstr("'annotations' must be a list"));
  EXPECT_THAT(ErrorOf(R"({"annotations": [{"tensor": "w", "mesh": {"shape": [2]}, "placements": ["R"]}, 3]})"),
              HasSubstr("strategy section 'annotations[1]' must be a JSON object"));
}

}  // namespace
}  // namespace pdist::strategy
