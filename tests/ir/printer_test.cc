// Printer and parser round trips: golden text, print → parse → print, attribute kinds.
#include <cmath>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/builder.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "tests/ir/sample_programs.h"

namespace pdist::ir {
namespace {

using ::pdist::testing::F32;

void ExpectRoundTrip(const Program& program) {
  const std::string text = PrintProgram(program);
  absl::StatusOr<Program> parsed = ParseProgram(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << text;
  EXPECT_EQ(PrintProgram(*parsed), text);
  EXPECT_TRUE(VerifyProgram(*parsed).ok()) << VerifyProgram(*parsed);
}

TEST(PrinterTest, GoldenMatmulSum) {
  EXPECT_EQ(PrintProgram(testing::MatmulSumProgram()),
            "program {\n"
            "  %0 = data \"x\" : f32[8,64]\n"
            "  %1 = param \"w\" : f32[64,64] {init = \"normal(0.02)\"}\n"
            "  %2 = matmul(%0, %1) {trans_x = false, trans_y = false} : f32[8,64]\n"
            "  %3 = sum(%2) {axis = int[], keep_dim = false} : f32[]\n"
            "  loss %3\n"
            "}\n");
}

TEST(PrinterTest, GoldenRichProgramLines) {
  const std::string text = PrintProgram(testing::RichProgram());
  EXPECT_THAT(text, ::testing::HasSubstr("%2 = param \"bias\" : f32[6] {init = \"zeros\", trainable = false}\n"));
  EXPECT_THAT(text, ::testing::HasSubstr("%4 = state \"step\" : i64[1] {init = \"zeros\"}\n"));
  EXPECT_THAT(text, ::testing::HasSubstr(
                        "%7, %8, %9 = layer_norm(%6, %3, none) {begin_norm_axis = 1, epsilon = 1e-06}"
                        " : f32[4,6], f32[4], f32[4]\n"));
  EXPECT_THAT(text, ::testing::HasSubstr("%13 = concat(%12, %10, %11) {axis = 1} : f32[4,6]\n"));
}

TEST(PrinterTest, GradientRolesAndBindingsPrint) {
  const std::string text = PrintProgram(testing::TrainingProgram());
  EXPECT_THAT(text, ::testing::HasSubstr(": grad f32[4,6]"));
  EXPECT_THAT(text, ::testing::ContainsRegex("gradient %1 <- %[0-9]+\n"));
  EXPECT_THAT(text, ::testing::ContainsRegex("update %1 <- %[0-9]+\n"));
  EXPECT_THAT(text, ::testing::HasSubstr("state \"w.moment1\" : f32[6,6] {init = \"zeros\"}"));
}

TEST(PrinterTest, RoundTripBuiltPrograms) {
  ExpectRoundTrip(testing::MatmulSumProgram());
  ExpectRoundTrip(testing::RichProgram());
  ExpectRoundTrip(testing::TrainingProgram());
}

TEST(PrinterTest, NumberingIsCanonicalNotInternalIds) {
  // An op inserted at the front has a larger internal id than the ops after it; the text
  // numbers values in definition order all the same.
  Program p;
  Builder b(&p);
  Value* x = b.Data("x", F32({2, 3}));
  Value* y = b.Op1("relu", {x}).value();
  b.SetInsertionPoint(0);
  Value* z = b.Op1("exp", {x}).value();
  b.SetInsertionPoint(-1);
  b.Op1("add", {y, z}).value();
  const std::string text = PrintProgram(p);
  EXPECT_THAT(text, ::testing::HasSubstr("%1 = exp(%0) : f32[2,3]\n  %2 = relu(%0) : f32[2,3]\n"));
  EXPECT_THAT(text, ::testing::HasSubstr("%3 = add(%2, %1) : f32[2,3]\n"));
  ExpectRoundTrip(p);
}

TEST(PrinterTest, ParsedNamesAreFreeAndIdsFollowDefinitionOrder) {
  absl::StatusOr<Program> p = ParseProgram(R"(
    // names need not be numbers
    program {
      %input = data "x" : f32[2,3]

      %h.1 = relu(%input) : f32[2,3]   // trailing comment
      %out = scale(%h.1) {scale = 2} : f32[2,3]
    })");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(PrintProgram(*p), ::testing::HasSubstr("%2 = scale(%1) {bias = 0.0, bias_after_scale = true, scale = 2.0}"));
  EXPECT_EQ(p->FindValue(2)->producer()->type(), "scale");
}

TEST(PrinterTest, UndefinedOperandPrintsUnparsably) {
  Program p;
  Builder b(&p);
  Value* x = b.Data("x", F32({2}));
  Value* stray = p.NewValue(F32({2}), ValueRole::kActivation);  // never defined
  p.block().Append(std::make_unique<Operation>("add", std::vector<Value*>{x, stray}, AttributeMap{}));
  const std::string text = PrintProgram(p);
  EXPECT_THAT(text, ::testing::HasSubstr("add(%0, %<undefined id 1>)"));
  EXPECT_FALSE(ParseProgram(text).ok());
}

TEST(AttributeTextTest, EveryKindRoundTrips) {
  const std::vector<Attribute> attrs = {
      true, false, int64_t{0}, int64_t{-1}, std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min(),
      0.0, -0.0, 1e-5, 0.1, 1.0 / 3, 1e300, 5e-324, -2.5, std::numeric_limits<double>::infinity(),
      -std::numeric_limits<double>::infinity(), std::string(""), std::string("a \"quoted\" \\ back\nslash // x"),
      DataType::kBFloat16, DataType::kBool, std::vector<bool>{}, std::vector<bool>{true, false},
      std::vector<int64_t>{}, std::vector<int64_t>{3, -1, 0}, std::vector<double>{}, std::vector<double>{1.0, -0.5, 2e10},
      std::vector<std::string>{}, std::vector<std::string>{"a", "b,c", "]"}};
  for (const Attribute& attr : attrs) {
    const std::string text = AttributeToString(attr);
    absl::StatusOr<Attribute> parsed = ParseAttribute(text);
    ASSERT_TRUE(parsed.ok()) << text << ": " << parsed.status();
    EXPECT_EQ(KindOf(*parsed), KindOf(attr)) << text;
    EXPECT_EQ(AttributeToString(*parsed), text);
    if (std::holds_alternative<double>(attr)) {
      EXPECT_EQ(std::signbit(std::get<double>(*parsed)), std::signbit(std::get<double>(attr))) << text;
    }
    EXPECT_TRUE(*parsed == attr) << text;
  }
}

TEST(AttributeTextTest, NanAndWidening) {
  absl::StatusOr<Attribute> nan = ParseAttribute("nan");
  ASSERT_TRUE(nan.ok());
  EXPECT_TRUE(std::isnan(std::get<double>(*nan)));
  absl::StatusOr<Attribute> mixed = ParseAttribute("[1, 2.5, -inf]");
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  EXPECT_EQ(std::get<std::vector<double>>(*mixed).size(), 3u);
}

TEST(AttributeTextTest, Errors) {
  EXPECT_THAT(std::string(ParseAttribute("[]").status().message()), ::testing::HasSubstr("int[], double[], bool[] or string[]"));
  EXPECT_THAT(std::string(ParseAttribute("[1, \"a\"]").status().message()), ::testing::HasSubstr("list mixes int and string"));
  EXPECT_THAT(std::string(ParseAttribute("99999999999999999999").status().message()), ::testing::HasSubstr("out of range"));
  EXPECT_THAT(std::string(ParseAttribute("1e999").status().message()), ::testing::HasSubstr("out of range"));
  EXPECT_THAT(std::string(ParseAttribute("int").status().message()), ::testing::HasSubstr("expected '[]' after 'int'"));
  EXPECT_THAT(std::string(ParseAttribute("f33").status().message()), ::testing::HasSubstr("expected an attribute value"));
  EXPECT_THAT(std::string(ParseAttribute("\"a\\q\"").status().message()), ::testing::HasSubstr("unknown escape"));
  EXPECT_THAT(std::string(ParseAttribute("1 2").status().message()), ::testing::HasSubstr("line 1:3: expected end of input"));
}

}  // namespace
}  // namespace pdist::ir
