// FlagSet: flag forms, positional arguments, errors that name the flag, generated help.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/cli.h"

namespace pdist::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct Flags {
  std::string passes, output;
  bool verify = false;
  int64_t steps = 10;
  double lr = 0.5;
  FlagSet set{"tool", "INPUT [options]", "Does things."};
  Flags() {
    set.String("passes", &passes, "pipeline");
    set.String("o", &output, "output file");
    set.Bool("verify", &verify, "verify only");
    set.Int("steps", &steps, "number of steps");
    set.Double("lr", &lr, "learning rate");
  }
  absl::StatusOr<std::vector<std::string>> Parse(std::vector<const char*> args) {
    args.insert(args.begin(), "tool");
    return set.Parse(static_cast<int>(args.size()), args.data());
  }
};

TEST(CliTest, FlagFormsAndPositionals) {
  Flags f;
  absl::StatusOr<std::vector<std::string>> args =
      f.Parse({"in.pdir", "--passes=a,b", "--steps", "3", "-o", "out.pb", "--lr=1e-3", "--verify", "-", "--", "--x"});
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_THAT(*args, ElementsAre("in.pdir", "-", "--x"));
  EXPECT_EQ(f.passes, "a,b");
  EXPECT_EQ(f.steps, 3);
  EXPECT_EQ(f.output, "out.pb");
  EXPECT_EQ(f.lr, 1e-3);
  EXPECT_TRUE(f.verify);
  // A boolean never takes the next argument; =false turns it off.
  Flags g;
  args = g.Parse({"--verify", "x", "--verify=false"});
  ASSERT_TRUE(args.ok());
  EXPECT_THAT(*args, ElementsAre("x"));
  EXPECT_FALSE(g.verify);
}

TEST(CliTest, ErrorsNameTheFlagAndValue) {
  Flags f;
  EXPECT_EQ(f.Parse({"--pases=x"}).status().message(), "unknown flag --pases");
  EXPECT_EQ(f.Parse({"-passes", "x"}).status().message(), "unknown flag -passes");
  EXPECT_EQ(f.Parse({"--steps=ten"}).status().message(), "flag --steps: 'ten' is not an integer");
  EXPECT_EQ(f.Parse({"--lr", "fast"}).status().message(), "flag --lr: 'fast' is not a number");
  EXPECT_EQ(f.Parse({"--verify=maybe"}).status().message(), "flag --verify: 'maybe' is not true or false");
  EXPECT_EQ(f.Parse({"--steps"}).status().message(), "flag --steps needs a value (INT)");
  // An unset shell variable (`--save "$DIR"`) and nan/inf are mistakes, not defaults.
  EXPECT_EQ(f.Parse({"--passes="}).status().message(),
            "flag --passes: an empty value (leave the flag out for its default)");
  EXPECT_EQ(f.Parse({"-o", ""}).status().message(), "flag -o: an empty value (leave the flag out for its default)");
  EXPECT_EQ(f.Parse({"--lr=nan"}).status().message(), "flag --lr: 'nan' is not a finite number");
  EXPECT_EQ(f.Parse({"--lr", "-inf"}).status().message(), "flag --lr: '-inf' is not a finite number");
  EXPECT_EQ(f.Parse({"--lr", "1e400"}).status().message(), "flag --lr: '1e400' is not a finite number");
}

TEST(CliTest, GivenSaysWhichFlagsTheLastParseSaw) {
  Flags f;
  ASSERT_TRUE(f.Parse({"--steps", "10", "--verify"}).ok());
  EXPECT_TRUE(f.set.Given("steps"));  // given, though equal to the default
  EXPECT_TRUE(f.set.Given("verify"));
  EXPECT_FALSE(f.set.Given("lr"));
  ASSERT_TRUE(f.Parse({"--lr=1"}).ok());
  EXPECT_FALSE(f.set.Given("steps"));
  EXPECT_TRUE(f.set.Given("lr"));
}

TEST(CliTest, HelpIsGenerated) {
  Flags f;
  ASSERT_TRUE(f.Parse({"--help"}).ok());
  EXPECT_TRUE(f.set.help_requested());
  const std::string help = f.set.Help();
  EXPECT_THAT(help, HasSubstr("usage: tool INPUT [options]\n\nDoes things.\n"));
  EXPECT_THAT(help, HasSubstr("--passes=STRING"));
  EXPECT_THAT(help, HasSubstr("-o STRING"));
  EXPECT_THAT(help, HasSubstr("--steps=INT"));
  EXPECT_THAT(help, HasSubstr("number of steps (default: 10)"));
  EXPECT_THAT(help, HasSubstr("--verify "));
}

void ParseOrExitWith(const char* arg) {
  Flags f;
  const char* argv[] = {"tool", arg};
  f.set.ParseOrExit(2, argv);
}

TEST(CliTest, ExitCodes) {
  EXPECT_EXIT(ParseOrExitWith("--nope"), ::testing::ExitedWithCode(2), "tool: unknown flag --nope");
  EXPECT_EXIT(ParseOrExitWith("--help"), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace pdist::cli
