// Parser error messages: each names the position (line:column) and what was expected.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/serialize.h"

namespace pdist::ir {
namespace {

// Parses `body` inside `program {` ... `}` (the body starts on line 2) and returns the error.
std::string ErrorOf(const std::string& body) {
  absl::StatusOr<Program> p = ParseProgram("program {\n" + body + "\n}\n");
  EXPECT_FALSE(p.ok()) << body;
  return p.ok() ? "" : std::string(p.status().message());
}

TEST(ParserErrorTest, ExpectedCloseParen) {
  EXPECT_EQ(ErrorOf("  %0 = data \"x\" : f32[2]\n  %1 = relu(%0 {x = 1} : f32[2]"),
            "line 3:16: expected ',' or ')' after an operand, got '{'");
  EXPECT_EQ(ErrorOf("  %0 = data \"x\" : f32[2]\n  %1 = relu(%0, {x = 1} : f32[2]"),
            "line 3:17: expected a value (%name), got '{'");
}

TEST(ParserErrorTest, UnknownOpNamesIt) {
  absl::StatusOr<Program> p = ParseProgram("program {\n  %0 = data \"x\" : f32[2]\n  %1 = matmull(%0, %0) : f32[2]\n}");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(p.status().message()), ::testing::StartsWith("line 3:8: unknown op type 'matmull'"));
}

TEST(ParserErrorTest, UndefinedAndRedefinedValues) {
  EXPECT_EQ(ErrorOf("  %1 = relu(%0) : f32[2]"), "line 2:13: use of undefined value %0");
  EXPECT_EQ(ErrorOf("  %0 = data \"x\" : f32[2]\n  %0 = relu(%0) : f32[2]"),
            "line 3:3: value %0 is defined twice (first at line 2:3)");
  EXPECT_EQ(ErrorOf("  %0 = data \"x\" : f32[2]\n  loss %9"), "line 3:8: use of undefined value %9");
}

TEST(ParserErrorTest, ResultTypeMismatchNamesTheOp) {
  EXPECT_EQ(ErrorOf("  %0 = data \"x\" : f32[2,3]\n  %1 = relu(%0) : f32[3,2]"),
            "line 3:8: op 'relu': result %1 is written as f32[3,2] but the op infers f32[2,3]");
  EXPECT_EQ(ErrorOf("  %0 = data \"x\" : f32[2,3]\n  %1, %2 = relu(%0) : f32[2,3], f32[2,3]"),
            "line 3:12: op 'relu': the text names 2 results, the op has 1");
  EXPECT_THAT(ErrorOf("  %0 = data \"x\" : f32[2,3]\n  %1 = matmul(%0, %0) : f32[2,3]"),
              ::testing::StartsWith("line 3:8: op 'matmul': matmul(f32[2,3], f32[2,3]): "));
}

TEST(ParserErrorTest, AttributeErrors) {
  EXPECT_THAT(ErrorOf("  %0 = data \"x\" : f32[2]\n  %1 = scale(%0) {scal = 2.0} : f32[2]"),
              ::testing::StartsWith("line 3:8: op 'scale': op 'scale' has no attribute 'scal' (known: "));
  EXPECT_EQ(ErrorOf("  %0 = data \"x\" : f32[2]\n  %1 = scale(%0) {scale = true} : f32[2]"),
            "line 3:8: op 'scale': op 'scale': attribute 'scale' is bool, expected double");
  EXPECT_EQ(ErrorOf("  %0 = data \"x\" : f32[2]\n  %1 = scale(%0) {scale = 1, scale = 2} : f32[2]"),
            "line 3:30: attribute 'scale' is given twice");
  EXPECT_EQ(ErrorOf("  %0 = data \"x\" : f32[2]\n  %1 = scale(%0) {scale 2} : f32[2]"),
            "line 3:25: expected '=' after attribute name 'scale', got '2'");
}

TEST(ParserErrorTest, OperandChecks) {
  EXPECT_EQ(ErrorOf("  %0 = data \"x\" : f32[2]\n  %1 = relu(none) : f32[2]"),
            "line 3:13: op 'relu': operand 0 is not optional");
  EXPECT_THAT(ErrorOf("  %0 = data \"x\" : f32[2]\n  %1 = relu(%0, %0) : f32[2]"),
              ::testing::StartsWith("line 3:8: op 'relu': op 'relu' takes 1 operands, got 2"));
}

TEST(ParserErrorTest, TypesAndArguments) {
  EXPECT_EQ(ErrorOf("  %0 = data \"x\" : f33[2]"),
            "line 2:19: unknown data type 'f33' (expected f32, f64, bf16, f16, i32, i64 or bool)");
  EXPECT_EQ(ErrorOf("  %0 = data \"x\" : f32"), "line 3:1: expected '[' after the data type (a scalar is f32[]), got '}'");
  EXPECT_EQ(ErrorOf("  %0 = data \"x\" : f32[2,-1]"), "line 2:25: dimension -1 is negative (shapes are static)");
  EXPECT_EQ(ErrorOf("  %0 = weight \"x\" : f32[2]"),
            "line 2:8: unknown argument role 'weight' (expected data, param, state, act or grad)");
  EXPECT_THAT(ErrorOf("  %0 = param \"x\" : f32[2] {init = 3}"),
              ::testing::StartsWith("line 2:27: argument attribute 'init' is unknown or of the wrong kind"));
  EXPECT_EQ(ErrorOf("  %0, %1 = data \"x\" : f32[2]"), "line 2:7: an argument defines exactly one value");
  EXPECT_THAT(ErrorOf("  %0 = data \"x\" : f32[4611686018427387904,4]"), ::testing::HasSubstr("too many elements"));
}

TEST(ParserErrorTest, BindingsAndStructure) {
  EXPECT_EQ(ErrorOf("  %0 = param \"w\" : f32[2]\n  update %0 %0"),
            "line 3:13: expected '<-' in 'update %state <- %value', got '%0'");
  EXPECT_EQ(ErrorOf("  %0 = data \"x\" : f32[]\n  loss %0\n  loss %0"), "line 4:3: the program's loss is given twice");
  EXPECT_EQ(ErrorOf("  = relu"), "line 2:3: expected a statement (%value = ..., loss, output, gradient, update), got '='");

  absl::StatusOr<Program> p = ParseProgram("prog {}");
  EXPECT_EQ(p.status().message(), "line 1:1: expected 'program', got 'prog'");
  p = ParseProgram("program {\n  %0 = data \"x\" : f32[2]\n");
  EXPECT_EQ(p.status().message(), "line 3:1: expected '}' at the end of the program, got end of input");
  p = ParseProgram("program {} program {}");
  EXPECT_EQ(p.status().message(), "line 1:12: expected end of input after the program's '}', got 'program'");
  p = ParseProgram("program {\n  %0 = data \"x : f32[2]\n}");
  EXPECT_EQ(p.status().message(), "line 2:13: unterminated string");
  p = ParseProgram("program {\n  %0 = data \"x\" : f32[2] $\n}");
  EXPECT_EQ(p.status().message(), "line 2:26: unexpected character '$'");
  p = ParseProgram("program {\n  % = data \"x\" : f32[2]\n}");
  EXPECT_EQ(p.status().message(), "line 2:3: expected a value name after '%'");
  p = ParseProgram("program {\n  %0 = data \"x\xff\" : f32[2]\n}");
  EXPECT_EQ(p.status().message(), "line 2:13: string is not valid UTF-8");  // found by fuzz_model_loader
  p = ParseProgram("program {\n  %0 = data \"x\" : f32[2x]\n}");
  EXPECT_EQ(p.status().message(), "line 2:23: malformed number '2x'");
}

TEST(ParserTest, EmptyProgramAndOptionalRoleKeyword) {
  absl::StatusOr<Program> p = ParseProgram("// nothing\nprogram {\n}\n");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->num_values(), 0);
  p = ParseProgram("program {\n  %0 = data \"x\" : f32[2]\n  %1 = relu(%0) : act f32[2]\n  %2 = relu(%1) : grad f32[2]\n}");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->FindValue(1)->role(), ValueRole::kActivation);
  EXPECT_EQ(p->FindValue(2)->role(), ValueRole::kGradient);
}

}  // namespace
}  // namespace pdist::ir

namespace pdist::ir {
namespace {

// An op's pipeline job survives printing and parsing; a malformed one names the token.
TEST(ParserTest, RoleAndChunkSuffixRoundTrips) {
  const std::string text =
      "program {\n"
      "  %0 = data \"x\" : f32[2]\n"
      "  %1 = param \"w\" : f32[2] {init = \"zeros\"}\n"
      "  %2 = tanh(%0) : f32[2] @forward.1\n"
      "  %3 = tanh(%2) : f32[2] @backward_weight\n"
      "  c_send(%3) {lane = 0, peer = 1, tag = 3} @backward.1\n"
      "  %4 = tanh(%1) : f32[2] @prologue\n"
      "}\n";
  absl::StatusOr<Program> p = ParseProgram(text);
  ASSERT_TRUE(p.ok()) << p.status();
  const auto& ops = p->block().ops();
  EXPECT_EQ(ops[0]->role(), OpRole::kForward);
  EXPECT_EQ(ops[0]->chunk(), 1);
  EXPECT_EQ(ops[1]->role(), OpRole::kBackwardWeight);
  EXPECT_EQ(ops[2]->role(), OpRole::kBackward);
  EXPECT_EQ(ops[2]->chunk(), 1);
  EXPECT_EQ(ops[3]->role(), OpRole::kPrologue);
  EXPECT_EQ(PrintProgram(*p), text);
  // And through model.pb (role 4).
  absl::StatusOr<std::string> bytes = SerializeProgram(*p);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<Program> back = DeserializeProgram(*bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(PrintProgram(*back), text);

  absl::StatusOr<Program> bad = ParseProgram("program {\n  %0 = data \"x\" : f32[2]\n  %1 = tanh(%0) : f32[2] @sideways\n}");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unknown role 'sideways'"), std::string::npos) << bad.status();
}

}  // namespace
}  // namespace pdist::ir
