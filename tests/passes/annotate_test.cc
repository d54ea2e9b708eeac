// ApplyAnnotations: glob matching, Megatron-style annotations on a GPT, all-or-nothing errors.
#include "passes/annotate.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/models/gpt.h"
#include "ir/printer.h"
#include "ir/verifier.h"

namespace pdist::passes {
namespace {

using ::testing::HasSubstr;

ir::Program TinyGpt() {
  ir::models::GptConfig c;
  c.vocab = 64;
  c.hidden = 16;
  c.layers = 2;
  c.heads = 2;
  c.seq_len = 8;
  c.batch = 2;
  absl::StatusOr<ir::Program> p = ir::models::BuildGpt(c);
  EXPECT_TRUE(p.ok()) << p.status();
  return std::move(*p);
}

strategy::Strategy Parse(const std::string& json) {
  absl::StatusOr<strategy::Strategy> s = strategy::ParseStrategy(json);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : strategy::Strategy{};
}

// An annotation on mesh [2,2] [dp,mp]; `placements` is comma-separated: "Replicate(),Shard(1)".
std::string Annotation(const std::string& tensor, const std::string& placements) {
  std::string list;
  for (size_t start = 0; start <= placements.size();) {
    const size_t comma = std::min(placements.find(',', start), placements.size());
    list += (list.empty() ? "\"" : ", \"") + placements.substr(start, comma - start) + "\"";
    start = comma + 1;
  }
  return R"({"tensor": ")" + tensor + R"(", "mesh": {"shape": [2, 2], "dim_names": ["dp", "mp"]}, "placements": [)" +
         list + "]}";
}

std::string Strategy(const std::vector<std::string>& annotations) {
  std::string list;
  for (const std::string& a : annotations) list += (list.empty() ? "" : ", ") + a;
  return R"({"annotations": [)" + list + "]}";
}

TEST(GlobMatchTest, StarMatchesAnyRun) {
  EXPECT_TRUE(GlobMatch("gpt.h.*.attn.qkv.weight", "gpt.h.11.attn.qkv.weight"));
  EXPECT_TRUE(GlobMatch("*", ""));
  EXPECT_TRUE(GlobMatch("*.weight", "a.b.weight"));
  EXPECT_TRUE(GlobMatch("a*b*c", "aXbYbZc"));
  EXPECT_TRUE(GlobMatch("w", "w"));
  EXPECT_FALSE(GlobMatch("w", "w2"));
  EXPECT_FALSE(GlobMatch("*.bias", "ln.scale"));
  EXPECT_FALSE(GlobMatch("gpt.h.*.qkv", "gpt.h.0.attn.qkv.weight"));
  EXPECT_FALSE(GlobMatch("", "x"));
}

TEST(ApplyAnnotationsTest, MegatronStyleOnGpt) {
  ir::Program p = TinyGpt();
  const strategy::Strategy s = Parse(Strategy({Annotation("tokens", "Shard(0),Replicate()"),
                                               Annotation("gpt.h.*.attn.qkv.weight", "Replicate(),Shard(1)"),
                                               Annotation("gpt.h.*.attn.proj.weight", "Replicate(),Shard(0)")}));
  ASSERT_TRUE(ApplyAnnotations(s, p).ok()) << ApplyAnnotations(s, p);
  int qkv = 0, proj = 0, plain = 0;
  for (const ir::Value* v : p.block().arguments()) {
    const std::string& name = v->name();
    if (name.find("attn.qkv.weight") != std::string::npos) {
      ++qkv;
      ASSERT_TRUE(v->dist_attr()) << name;
      EXPECT_EQ(v->dist_attr()->dims_mapping, ir::DimsMapping({-1, 1})) << name;
      EXPECT_TRUE(v->dist_annotated());
    } else if (name.find("attn.proj.weight") != std::string::npos) {
      ++proj;
      ASSERT_TRUE(v->dist_attr()) << name;
      EXPECT_EQ(v->dist_attr()->dims_mapping, ir::DimsMapping({1, -1})) << name;
    } else if (name == "tokens") {
      EXPECT_EQ(v->dist_attr()->ToString(), "{mesh: [2,2] [dp,mp], dims_mapping: [0,-1]}");
    } else {
      ++plain;
      EXPECT_FALSE(v->dist_attr()) << name;
    }
  }
  EXPECT_EQ(qkv, 2);
  EXPECT_EQ(proj, 2);
  EXPECT_GT(plain, 0);
  EXPECT_TRUE(ir::VerifyProgram(p).ok());
  EXPECT_THAT(ir::PrintProgram(p), HasSubstr("dist! {mesh: [2,2] [dp,mp], dims_mapping: [-1,1]}"));
}

TEST(ApplyAnnotationsTest, UnmatchedAnnotationIsAnErrorNamingIt) {
  ir::Program p = TinyGpt();
  const absl::Status s = ApplyAnnotations(
      Parse(Strategy({Annotation("tokens", "R,R"), Annotation("gpt.h.*.mlp.upp.weight", "R,S(1)")})), p);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("annotations[1]: tensor \"gpt.h.*.mlp.upp.weight\" matches no block argument"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("(arguments: tokens"));
  EXPECT_FALSE(p.FindArgument("tokens")->dist_attr());  // nothing applied
}

TEST(ApplyAnnotationsTest, PlacementThatDoesNotFitNamesTensorAndAnnotation) {
  ir::Program p = TinyGpt();
  // Shard(2) fits no weight matrix; the first annotation must be rolled back too.
  const absl::Status s = ApplyAnnotations(
      Parse(Strategy({Annotation("tokens", "S(0),R"), Annotation("gpt.h.0.attn.qkv.weight", "R,Shard(2)")})),
      p);
  EXPECT_THAT(std::string(s.message()), HasSubstr("annotations[1] (\"gpt.h.0.attn.qkv.weight\")"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("shard_tensor('gpt.h.0.attn.qkv.weight'"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("Shard(2)"));
  EXPECT_FALSE(p.FindArgument("tokens")->dist_attr());
  EXPECT_FALSE(p.FindArgument("tokens")->dist_annotated());
}

TEST(ApplyAnnotationsTest, OverlappingAnnotationsMustAgree) {
  ir::Program p = TinyGpt();
  const absl::Status s = ApplyAnnotations(
      Parse(Strategy({Annotation("gpt.h.*.weight", "R,R"), Annotation("gpt.h.1.attn.qkv.weight", "R,S(1)")})), p);
  EXPECT_THAT(std::string(s.message()), HasSubstr("annotations[0] (\"gpt.h.*.weight\") and annotations[1] "
                                                  "(\"gpt.h.1.attn.qkv.weight\") give tensor 'gpt.h.1.attn.qkv.weight' "
                                                  "different placements"));
  // The same placements twice are fine.
  ir::Program q = TinyGpt();
  EXPECT_TRUE(ApplyAnnotations(Parse(Strategy({Annotation("tokens", "S(0),R"), Annotation("tok*", "S(0),R")})), q)
                  .ok());
}

TEST(ApplyAnnotationsTest, NoAnnotationsChangeNothing) {
  ir::Program p = TinyGpt();
  const std::string before = ir::PrintProgram(p);
  EXPECT_TRUE(ApplyAnnotations(strategy::Strategy{}, p).ok());
  EXPECT_EQ(ir::PrintProgram(p), before);
}

}  // namespace
}  // namespace pdist::passes
