// Pass infrastructure: pipeline text, registry, option reading, PassManager verification/dumps/timing.
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/builder.h"
#include "ir/printer.h"
#include "passes/pass_manager.h"
#include "tests/ir/sample_programs.h"

namespace pdist::passes {
namespace {

using ::testing::HasSubstr;

TEST(PipelineTest, ParseAndPrintRoundTrip) {
  absl::StatusOr<std::vector<PassSpec>> specs = ParsePipeline(" autodiff , optimizer{ type = sgd ,beta1=0.5} ,x{}");
  ASSERT_TRUE(specs.ok()) << specs.status();
  ASSERT_EQ(specs->size(), 3u);
  EXPECT_EQ((*specs)[1], (PassSpec{"optimizer", {{"type", "sgd"}, {"beta1", "0.5"}}}));
  EXPECT_EQ(PrintPipeline(*specs), "autodiff,optimizer{beta1=0.5,type=sgd},x");
  EXPECT_EQ(*ParsePipeline(PrintPipeline(*specs)), *specs);
  EXPECT_TRUE(ParsePipeline("")->empty());
}

TEST(PipelineTest, Errors) {
  EXPECT_EQ(ParsePipeline("autodiff,optimizer{type").status().message(),
            "pipeline column 24: expected '=' after option 'type' (in 'autodiff,optimizer{type')");
  EXPECT_THAT(std::string(ParsePipeline("a b").status().message()), HasSubstr("column 3: expected ',' between passes"));
  EXPECT_THAT(std::string(ParsePipeline("a,,b").status().message()), HasSubstr("column 3: expected a pass name"));
  EXPECT_THAT(std::string(ParsePipeline("a{x=}").status().message()), HasSubstr("option 'x' has no value"));
  EXPECT_THAT(std::string(ParsePipeline("a{x=1,x=2}").status().message()), HasSubstr("option 'x' is given twice"));
  EXPECT_THAT(std::string(ParsePipeline("a{x=1").status().message()), HasSubstr("expected ',' or '}' after option 'x'"));
}

TEST(PassOptionReaderTest, TypedValuesAndUnknownKeys) {
  const PassOptions options = {{"n", "3"}, {"f", "0.25"}, {"b", "true"}, {"s", "hi"}};
  PassOptionReader reader("p", options);
  int64_t n = 0;
  double f = 0;
  bool b = false;
  std::string s, absent = "kept";
  ASSERT_TRUE(reader.Read("n", &n).ok());
  ASSERT_TRUE(reader.Read("f", &f).ok());
  ASSERT_TRUE(reader.Read("b", &b).ok());
  ASSERT_TRUE(reader.Read("absent", &absent).ok());
  EXPECT_EQ(reader.Finish().message(), "pass 'p' has no option 's' (options: absent, b, f, n)");
  ASSERT_TRUE(reader.Read("s", &s).ok());
  EXPECT_TRUE(reader.Finish().ok());
  EXPECT_EQ(n, 3);
  EXPECT_EQ(f, 0.25);
  EXPECT_TRUE(b);
  EXPECT_EQ(absent, "kept");

  // The reader keeps a reference to its options: they must outlive it.
  const PassOptions ten = {{"n", "ten"}};
  PassOptionReader bad("p", ten);
  EXPECT_EQ(bad.Read("n", &n).message(), "pass 'p': option n=ten is not an integer");
  const PassOptions out_of_range = {{"n", "99999999999999999999"}, {"m", "-"}, {"f", "nan"}};
  PassOptionReader huge("p", out_of_range);
  EXPECT_EQ(huge.Read("n", &n).message(), "pass 'p': option n=99999999999999999999 is not an integer within int64's range");
  EXPECT_EQ(huge.Read("m", &n).message(), "pass 'p': option m=- is not an integer");
  EXPECT_EQ(huge.Read("f", &f).message(), "pass 'p': option f=nan is not a finite number");
}

// Test passes: one that renames nothing (no change) and one that breaks the IR.
class NoopPass : public Pass {
 public:
  std::string_view name() const override { return "noop"; }
  absl::StatusOr<bool> Run(ir::Program&, PassContext& context) override {
    context.Explain(name(), "did nothing");
    return false;
  }
};

class BreakLossPass : public Pass {
 public:
  std::string_view name() const override { return "break-loss"; }
  absl::StatusOr<bool> Run(ir::Program& program, PassContext&) override {
    program.set_loss(program.FindValue(0));
    return true;
  }
};

TEST(PassRegistryTest, BuiltinsAndUnknownNames) {
  const PassRegistry& registry = PassRegistry::Global();
  EXPECT_THAT(registry.Names(), ::testing::IsSupersetOf({"autodiff", "completion", "optimizer"}));
  EXPECT_THAT(registry.Help(), HasSubstr("autodiff"));
  absl::StatusOr<std::unique_ptr<Pass>> pass = registry.Create({"autodif", {}});
  EXPECT_EQ(pass.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(pass.status().message()),
              HasSubstr("unknown pass 'autodif' (known: amp, annotate-strategy, autodiff, completion, "));
  EXPECT_THAT(std::string(registry.Create({"autodiff", {{"x", "1"}}}).status().message()),
              HasSubstr("pass 'autodiff' has no option 'x' (it takes none)"));
  EXPECT_THAT(std::string(registry.Create({"optimizer", {{"lr", "0.1"}}}).status().message()),
              HasSubstr("pass 'optimizer' has no option 'lr'"));
  EXPECT_THAT(std::string(registry.Create({"optimizer", {{"type", "adam"}}}).status().message()),
              HasSubstr("unknown optimizer 'adam'"));

  // The distributed passes' options: errors name the pass, the option and the value; what a
  // pipeline prints reads back into the same pass.
  const auto message = [&](const PassSpec& spec) { return std::string(registry.Create(spec).status().message()); };
  EXPECT_THAT(message({"micro-batch", {{"n", "0"}}}), HasSubstr("pass 'micro-batch': option 'n' must be >= 1, got 0"));
  EXPECT_THAT(message({"replicate-loss", {{"world", "-2"}}}),
              HasSubstr("pass 'replicate-loss': option 'world' must be >= 1, got -2"));
  EXPECT_THAT(message({"partition", {}}), HasSubstr("option 'rank' is required"));
  EXPECT_THAT(message({"recompute", {{"segments", "halves"}}}),
              HasSubstr("pass 'recompute': unknown recompute segments 'halves' (expected layers, stages or finest)"));
  EXPECT_THAT(message({"partition", {{"rank", "one"}}}), HasSubstr("option rank=one is not an integer"));
  EXPECT_THAT(message({"fuse-allreduce", {{"bucket_bytes", "-1"}}}), HasSubstr("bucket_bytes must be >= 0"));
  EXPECT_THAT(message({"split-weight-grad", {{"n", "1"}}}), HasSubstr("has no option 'n' (it takes none)"));
  for (const char* text : {"micro-batch{n=4}", "micro-batch", "replicate-loss{world=8}", "partition{rank=3}",
                           "fuse-allreduce", "fuse-allreduce{bucket_bytes=0}", "split-weight-grad",
                           "annotate-strategy", "annotate-strategy{mp=2,sp=true}",
                           "recompute{granularity=full,segments=stages}", "recompute{segments=finest}"}) {
    PassManager pm;
    ASSERT_TRUE(pm.AddPipeline(text).ok()) << text;
    EXPECT_EQ(pm.Pipeline(), text);
  }

  PassRegistry local;
  ASSERT_TRUE(local.Register("noop", "does nothing", [](const PassOptions&) -> absl::StatusOr<std::unique_ptr<Pass>> {
                     return std::make_unique<NoopPass>();
                   }).ok());
  EXPECT_EQ(local.Register("noop", "again", [](const PassOptions&) { return absl::StatusOr<std::unique_ptr<Pass>>(nullptr); }).code(),
            absl::StatusCode::kAlreadyExists);
}

TEST(PassManagerTest, BuiltinPipelineRunsAndPrintsBack) {
  ir::Program program = testing::RichProgram();
  PassManager pm;
  ASSERT_TRUE(pm.AddPipeline("autodiff,optimizer{type=momentum,momentum=0.5}").ok());
  EXPECT_EQ(pm.Pipeline(), "autodiff,optimizer{momentum=0.5,type=momentum}");
  PassContext context;
  absl::StatusOr<bool> changed = pm.Run(program, context);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  EXPECT_FALSE(program.gradients().empty());
  EXPECT_FALSE(program.updates().empty());
  EXPECT_THAT(ir::PrintProgram(program), HasSubstr("momentum("));
  ASSERT_EQ(context.explanations.size(), 2u);
  EXPECT_THAT(context.explanations[0], ::testing::StartsWith("autodiff: "));

  // The printed pipeline configures the same passes.
  PassManager again;
  ASSERT_TRUE(again.AddPipeline(pm.Pipeline()).ok());
  EXPECT_EQ(again.Pipeline(), pm.Pipeline());
  PassManager adamw;
  ASSERT_TRUE(adamw.AddPipeline("optimizer").ok());
  EXPECT_EQ(adamw.Pipeline(), "optimizer{type=adamw}");
}

TEST(PassManagerTest, VerifiesAfterEachPassAndNamesIt) {
  ir::Program program = testing::MatmulSumProgram();
  std::ostringstream dumps;
  PassManager pm({.print_after_all = &dumps, .time_passes = true});
  pm.AddPass(std::make_unique<NoopPass>());
  pm.AddPass(std::make_unique<BreakLossPass>());
  PassContext context;
  absl::StatusOr<bool> result = pm.Run(program, context);
  EXPECT_THAT(std::string(result.status().message()),
              ::testing::StartsWith("IR invalid after pass 'break-loss': loss %0 must be a floating-point scalar"));
  EXPECT_THAT(dumps.str(), HasSubstr("// -----// IR after noop //----- //\nprogram {\n"));
  EXPECT_THAT(dumps.str(), HasSubstr("// -----// IR after break-loss //----- //\nprogram {\n"));
  EXPECT_THAT(dumps.str(), HasSubstr("loss %0\n"));
  EXPECT_THAT(pm.TimingReport(), HasSubstr("noop  (no change)"));
}

TEST(PassManagerTest, FailingPassAndInvalidInputAreNamed) {
  ir::Program program = testing::MatmulSumProgram();
  PassManager pm;
  ASSERT_TRUE(pm.AddPipeline("optimizer{type=sgd}").ok());
  PassContext context;
  EXPECT_THAT(std::string(pm.Run(program, context).status().message()),
              ::testing::StartsWith("pass 'optimizer{type=sgd}': optimizer: the program has no gradients"));

  program.set_loss(program.FindValue(0));
  PassManager noop;
  noop.AddPass(std::make_unique<NoopPass>());
  EXPECT_THAT(std::string(noop.Run(program, context).status().message()),
              ::testing::StartsWith("invalid input to the pass pipeline: loss %0"));
  PassManager unchecked({.verify_each = false});
  unchecked.AddPass(std::make_unique<NoopPass>());
  EXPECT_TRUE(unchecked.Run(program, context).ok());
}

}  // namespace
}  // namespace pdist::passes
