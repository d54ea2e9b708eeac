// Segments found from the graph alone: GPT's and LLaMA's layers whatever their parameters are
// called, an MLP without repetition cut at every cut point; and every such program planned —
// 1 and 2 layers included — with pipeline cuts the passes accept.
#include "planner/program_segments.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "ir/models/gpt.h"
#include "ir/models/llama.h"
#include "ir/models/mlp.h"
#include "passes/distributed_programs.h"
#include "planner/planned_model.h"
#include "planner/search.h"

namespace pdist::planner {
namespace {

ir::Program Gpt(int64_t layers) {
  return *ir::models::BuildGpt({.vocab = 64, .hidden = 32, .layers = layers, .heads = 4, .seq_len = 8, .batch = 4});
}

// Every parameter renamed to a name that says nothing ("w17"), as an imported model might have.
ir::Program Anonymised(ir::Program program) {
  int64_t n = 0;
  for (ir::Value* p : program.Parameters()) p->set_name(absl::StrCat("w", n++));
  return program;
}

TEST(ProgramSegmentsTest, GptLayersAreFoundBetweenTheEmbeddingAndTheHead) {
  const ir::Program gpt = Gpt(4);
  absl::StatusOr<ProgramSegments> s = FindProgramSegments(gpt);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->layers, 4);
  ASSERT_EQ(s->segments.size(), 6u) << s->summary;
  EXPECT_EQ(s->kinds, 3);
  EXPECT_FALSE(s->segments.front().layer);
  EXPECT_FALSE(s->segments.back().layer);
  EXPECT_TRUE(s->segments.front().mark.empty());
  for (int64_t i = 0; i < 4; ++i) {
    const ProgramSegment& layer = s->segments[static_cast<size_t>(i + 1)];
    EXPECT_TRUE(layer.layer);
    EXPECT_EQ(layer.kind, s->segments[1].kind);
    EXPECT_TRUE(absl::StartsWith(layer.mark, absl::StrCat("gpt.h.", i, "."))) << layer.mark;
  }
  EXPECT_TRUE(absl::StartsWith(s->segments.back().mark, "gpt.ln_f.")) << s->segments.back().mark;
  // Layers are the same size: the op count between consecutive marks.
  const int64_t per_layer = s->segments[2].first_op - s->segments[1].first_op;
  for (size_t i = 2; i < 5; ++i) EXPECT_EQ(s->segments[i + 1].first_op - s->segments[i].first_op, per_layer);
}

TEST(ProgramSegmentsTest, NamesDoNotMatter) {
  const ProgramSegments named = *FindProgramSegments(Gpt(3));
  absl::StatusOr<ProgramSegments> anonymous = FindProgramSegments(Anonymised(Gpt(3)));
  ASSERT_TRUE(anonymous.ok()) << anonymous.status();
  ASSERT_EQ(anonymous->segments.size(), named.segments.size());
  EXPECT_EQ(anonymous->layers, 3);
  for (size_t i = 0; i < named.segments.size(); ++i) {
    EXPECT_EQ(anonymous->segments[i].first_op, named.segments[i].first_op) << i;
    EXPECT_EQ(anonymous->segments[i].kind, named.segments[i].kind) << i;
    if (i > 0) {
      EXPECT_TRUE(absl::StartsWith(anonymous->segments[i].mark, "w")) << anonymous->segments[i].mark;
    }
  }
}

TEST(ProgramSegmentsTest, LlamaLayersAreFound) {
  absl::StatusOr<ProgramSegments> s = FindProgramSegments(
      *ir::models::BuildLlama({.vocab = 64, .hidden = 32, .layers = 3, .heads = 4, .seq_len = 8, .batch = 2}));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->layers, 3) << s->summary;
}

TEST(ProgramSegmentsTest, WithoutRepetitionEveryCutPointStartsASegment) {
  const ir::Program mlp = *ir::models::BuildMlp({.input = 16, .hidden = {32, 48, 24}, .classes = 4});
  absl::StatusOr<ProgramSegments> s = FindProgramSegments(mlp);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->layers, 0) << s->summary;
  ASSERT_GE(s->segments.size(), 4u) << s->summary;
  EXPECT_EQ(s->kinds, static_cast<int64_t>(s->segments.size()));
  for (const ProgramSegment& seg : s->segments) EXPECT_TRUE(seg.layer);
  // Bounded: merged into as many as asked, the first still at op 0.
  absl::StatusOr<ProgramSegments> two = FindProgramSegments(mlp, 2);
  ASSERT_TRUE(two.ok()) << two.status();
  ASSERT_EQ(two->segments.size(), 2u);
  EXPECT_EQ(two->segments[0].first_op, 0);
}

TEST(ProgramSegmentsTest, AProgramWithoutOpsIsRefused) {
  ir::Program empty;
  absl::StatusOr<ProgramSegments> s = FindProgramSegments(empty);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("no ops"), std::string::npos) << s.status();
}

// The planner takes any of these as a model.pb: a plan comes out, and its pipeline cuts (pp 2,
// forced; interleaved or not) are ones the passes build.
TEST(PlanAnyProgramTest, SmallAndUnnamedProgramsArePlannedAndTheirCutsBuild) {
  struct Case {
    std::string name;
    ir::Program program;
  };
  std::vector<Case> cases;
  cases.push_back({"gpt 1 layer", Gpt(1)});
  cases.push_back({"gpt 2 layers (the README's)", Gpt(2)});
  cases.push_back({"gpt, anonymous parameters", Anonymised(Gpt(3))});
  cases.push_back({"llama 2 layers", *ir::models::BuildLlama({.vocab = 64, .hidden = 32, .layers = 2, .heads = 4,
                                                               .seq_len = 8, .batch = 4})});
  cases.push_back({"mlp", *ir::models::BuildMlp({.input = 16, .hidden = {32, 48}, .classes = 4, .batch = 4})});
  const strategy::Cluster cluster = *strategy::ClusterPreset("dgx-a100", 4);
  for (Case& c : cases) {
    SCOPED_TRACE(c.name);
    const ir::Program forward = c.program.Clone();
    absl::StatusOr<PlannedModel> model = ModelFromProgram(std::move(c.program), c.name);
    ASSERT_TRUE(model.ok()) << model.status();
    absl::StatusOr<SearchResult> any = Search(*model, cluster, {});
    ASSERT_TRUE(any.ok()) << any.status();
    ASSERT_FALSE(any->ranked.empty());
    SearchOptions pipelined;
    pipelined.fixed.pp = 2;
    absl::StatusOr<SearchResult> pp2 = Search(*model, cluster, pipelined);
    ASSERT_TRUE(pp2.ok()) << pp2.status();
    ASSERT_FALSE(pp2->ranked.empty());
    const Estimate& best = pp2->best();
    ASSERT_EQ(static_cast<int64_t>(best.split_before.size()), 2 * best.candidate.vpp - 1);
    absl::StatusOr<passes::DistributedPrograms> built =
        passes::BuildDistributedPrograms(forward, best.candidate.ToStrategy(best.split_before), passes::OptimizerConfig{});
    EXPECT_TRUE(built.ok()) << best.candidate.ToString()  << " cut at " << best.split_before.front() << ": " << built.status();
  }
}

// A model.pb's cut is found as the engine finds it: any pattern that starts a segment (not only
// the segment's own mark) is that segment's start; one that starts a stage inside a segment is
// refused, naming where the planner can cut.
TEST(PlanAnyProgramTest, AStageCutOfAProgramIsAnyPatternThatStartsASegment) {
  absl::StatusOr<PlannedModel> model = ModelFromProgram(Gpt(4), "gpt 4 layers");
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<StageCut> cut = StageCutFromMarks(*model, {"gpt.h.2.*"});
  ASSERT_TRUE(cut.ok()) << cut.status();
  EXPECT_EQ(cut->starts, std::vector<int64_t>{3});  // the embedding, layers 0 and 1 before it
  EXPECT_EQ(cut->marks, std::vector<std::string>{"gpt.h.2.*"});
  // The last parameter layer 2 reads is read deep inside it.
  std::string inside;
  for (const ir::Value* p : model->forward->Parameters()) {
    if (absl::StartsWith(p->name(), "gpt.h.2.")) inside = p->name();
  }
  ASSERT_FALSE(inside.empty());
  absl::StatusOr<StageCut> bad = StageCutFromMarks(*model, {inside});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("inside the segment from 'gpt.h.2."), std::string::npos) << bad.status();
  bad = StageCutFromMarks(*model, {"nothing.*"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("matches no argument an op reads"), std::string::npos) << bad.status();
  // Searched with the cut fixed: every plan has 2 virtual stages cut there.
  SearchOptions o;
  o.fixed.split_before = {"gpt.h.2.*"};
  absl::StatusOr<SearchResult> r = Search(*model, *strategy::ClusterPreset("dgx-a100", 4), o);
  ASSERT_TRUE(r.ok()) << r.status();
  for (const Estimate& e : r->ranked) EXPECT_EQ(e.split_before, std::vector<std::string>{"gpt.h.2.*"});
}

}  // namespace
}  // namespace pdist::planner
