// The einsum helpers (ir/spmd/einsum.h) and the EinsumRule engine (ir/spmd/einsum_rule.h).
#include "ir/spmd/einsum.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/spmd/einsum_rule.h"
#include "tests/spmd/spmd_test_util.h"

namespace pdist::ir::spmd {
namespace {

using nn_spmd_test::Print;
using nn_spmd_test::S;
using ::testing::HasSubstr;

TEST(MergeAxisShardings, MinusOneYieldsToSharding) {
  AxisShardings m = MergeAxisShardings({{"mk", {1, 0}}, {"kn", {-1, -1}}});
  EXPECT_EQ(m, (AxisShardings{{'m', 1}, {'k', 0}, {'n', -1}}));
  EXPECT_EQ(MappingForAxes("mn", m), (DimsMapping{1, -1}));
  EXPECT_EQ(PartialForMissingAxes("mn", m), (PartialDims{{0, ReduceType::kSum}}));
  EXPECT_EQ(PartialForMissingAxes("mn", m, ReduceType::kAvg), (PartialDims{{0, ReduceType::kAvg}}));
}

TEST(MergeAxisShardings, ConflictOnOneLetterKeepsTheFirst) {
  EXPECT_EQ(MergeAxisShardings({{"ab", {0, -1}}, {"ab", {1, -1}}}), (AxisShardings{{'a', 0}, {'b', -1}}));
}

TEST(MergeAxisShardings, MeshDimOnTwoLettersGoesToTheFirstRecorded) {
  // Paddle a.5: x[0,-1] + y[-1,0] → a keeps mesh dim 0, b loses it.
  EXPECT_EQ(MergeAxisShardings({{"ab", {0, -1}}, {"ab", {-1, 0}}}), (AxisShardings{{'a', 0}, {'b', -1}}));
  // Mesh [2,3]: x[0,-1,-1] + y[-1,1,0] → [0,1,-1].
  EXPECT_EQ(MappingForAxes("abc", MergeAxisShardings({{"abc", {0, -1, -1}}, {"abc", {-1, 1, 0}}})),
            (DimsMapping{0, 1, -1}));
  // Order of recording, not letter order: y's 'b' is recorded before z's 'a'.
  EXPECT_EQ(MappingForAxes("ab", MergeAxisShardings({{"b", {0}}, {"a", {0}}})), (DimsMapping{-1, 0}));
}

TEST(MergeAxisShardings, SizeOneLetterIsNeverSharded) {
  AxisShardings m = MergeAxisShardings({{"1b", {0, 1}}});
  EXPECT_EQ(m, (AxisShardings{{'b', 1}}));
  EXPECT_EQ(MappingForAxes("1b", m), (DimsMapping{-1, 1}));
  EXPECT_EQ(MappingForAxes("zb", m), (DimsMapping{-1, 1}));  // unknown letter → -1
}

TEST(EinsumHelpers, BroadcastAxesSkipReservedLetters) {
  EXPECT_EQ(BroadcastAxes(2, 3), "bc");
  EXPECT_EQ(BroadcastAxes(3, 3), "abc");
  EXPECT_EQ(BroadcastAxes(0, 3), "");
  EXPECT_EQ(BroadcastAxes(12, 12), "abcdefghijlo");  // k is left out
  EXPECT_EQ(BroadcastAxes(2, 2, "xyz"), "xy");
}

TEST(EinsumHelpers, Unshard) { EXPECT_EQ(Unshard({0, 1, -1}, {1, 7}), (DimsMapping{0, -1, -1})); }

TEST(AlignAxisShardings, PaddleConcatExample) {
  // Paddle a.12: mesh [2,2], [-1,0,1], [-1,1,0], [-1,-1,0], axis 0 excluded → all [-1,1,0].
  AxisShardings m = AlignAxisShardings(
      {{"abc", {4, 16, 16}, {-1, 0, 1}}, {"abc", {8, 16, 16}, {-1, 1, 0}}, {"abc", {4, 16, 16}, {-1, -1, 0}}}, {2, 2},
      "a");
  EXPECT_EQ(MappingForAxes("abc", m), (DimsMapping{-1, 1, 0}));
}

TEST(AlignAxisShardings, LetterSmallerThanMeshDimIsNotPicked) {
  AxisShardings m = AlignAxisShardings({{"ab", {2, 16}, {0, -1}}, {"ab", {2, 16}, {-1, 0}}}, {4});
  EXPECT_EQ(MappingForAxes("ab", m), (DimsMapping{-1, 0}));
}

TEST(AlignAxisShardings, AgreementCostsNothing) {
  AxisShardings m = AlignAxisShardings({{"ab", {8, 16}, {1, 0}}, {"ab", {8, 16}, {1, 0}}}, {2, 2});
  EXPECT_EQ(MappingForAxes("ab", m), (DimsMapping{1, 0}));
}

// --- the engine, on hand-made rules --------------------------------------------------------

EinsumRule Rule(std::vector<std::string> in, std::vector<std::string> out, PartialPolicy partial = {}) {
  EinsumRule rule;
  rule.op = "test_op";
  rule.inputs = std::move(in);
  rule.outputs = std::move(out);
  rule.input_names = {"x", "y"};
  rule.partial = std::move(partial);
  return rule;
}

absl::StatusOr<SpmdResult> RunRule(const EinsumRule& rule, const std::vector<TensorDistSpec>& in,
                                   std::vector<int64_t> mesh) {
  const AttributeMap attrs;
  return InferEinsum(rule, in, SpmdContext{std::move(mesh), attrs});
}

const PartialDims kSum0 = {{0, ReduceType::kSum}};
const PartialDims kAvg0 = {{0, ReduceType::kAvg}};
const PartialDims kMax0 = {{0, ReduceType::kMax}};

TEST(InferEinsum, ReplicatedLettersAndSizes) {
  EinsumRule rule = Rule({"abc"}, {"ac"});
  rule.replicated = "b";
  absl::StatusOr<SpmdResult> r = RunRule(rule, {S({4, 6, 8}, {0, 1, -1})}, {2, 3});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Print(r), "[0,-1,-1] -> [0,-1]");
  EXPECT_EQ(r->outputs[0].shape, (Shape{4, 8}));
}

TEST(InferEinsum, KOnePassesThePartialOfTheFirstLinearInput) {
  const EinsumRule rule = Rule({"ab", "ab"}, {"ab"}, PartialPolicy::Linear({0, 1}));
  EXPECT_EQ(Print(RunRule(rule, {S({4, 4}, {-1, 1}, kSum0), S({4, 4}, {-1, 1}, kSum0)}, {2, 2})),
            "[-1,1] {0: sum}, [-1,1] -> [-1,1] {0: sum}");
  EXPECT_EQ(Print(RunRule(rule, {S({4, 4}, {-1, -1}), S({4, 4}, {-1, -1}, kAvg0)}, {2, 2})),
            "[-1,-1], [-1,-1] {0: avg} -> [-1,-1] {0: avg}");
  EXPECT_EQ(Print(RunRule(rule, {S({4, 4}, {-1, -1}, kMax0), S({4, 4}, {-1, -1})}, {2, 2})),
            "[-1,-1], [-1,-1] -> [-1,-1]");
}

TEST(InferEinsum, KAlikeNeedsEveryLinearInputPartialAlike) {
  const EinsumRule rule = Rule({"ab", "ab"}, {"ab"}, PartialPolicy::Linear({0, 1}, PartialPolicy::Mode::kAlike));
  EXPECT_EQ(Print(RunRule(rule, {S({4, 4}, {-1, 1}, kSum0), S({4, 4}, {-1, 1}, kSum0)}, {2, 2})),
            "[-1,1] {0: sum}, [-1,1] {0: sum} -> [-1,1] {0: sum}");
  EXPECT_EQ(Print(RunRule(rule, {S({4, 4}, {-1, 1}, kSum0), S({4, 4}, {-1, 1}, kAvg0)}, {2, 2})),
            "[-1,1], [-1,1] -> [-1,1]");
  EXPECT_EQ(Print(RunRule(rule, {S({4, 4}, {-1, 1}, kSum0), S({4, 4}, {-1, 1})}, {2, 2})), "[-1,1], [-1,1] -> [-1,1]");
}

TEST(InferEinsum, PartialOnAMeshDimThatShardsALetterIsCleared) {
  // x is Partial on mesh dim 0, y shards b on it: x must be reduce-scattered (P → S).
  const EinsumRule rule = Rule({"ab", "ab"}, {"ab"}, PartialPolicy::Linear({0, 1}));
  EXPECT_EQ(Print(RunRule(rule, {S({4, 4}, {-1, -1}, kSum0), S({4, 4}, {-1, 0})}, {2})), "[-1,0], [-1,0] -> [-1,0]");
}

TEST(InferEinsum, ContractionAndPassThroughCombine) {
  const EinsumRule rule = Rule({"mk", "kn"}, {"mn"}, PartialPolicy::Linear({0, 1}));
  EXPECT_EQ(Print(RunRule(rule, {S({4, 4}, {-1, 0}, {{1, ReduceType::kSum}}), S({4, 4}, {-1, -1})}, {2, 2})),
            "[-1,0] {1: sum}, [0,-1] -> [-1,-1] {0: sum, 1: sum}");
}

TEST(InferEinsum, AbsentInputIsReturnedUnchanged) {
  const EinsumRule rule = Rule({"ab", "_"}, {"ab"});
  EXPECT_EQ(Print(RunRule(rule, {S({4, 4}, {0, -1}), nn_spmd_test::Absent()}, {2})), "[0,-1], _ -> [0,-1]");
}

TEST(InferEinsum, ErrorsNameTheOpAndTheMapping) {
  const EinsumRule rule = Rule({"ab"}, {"ab"});
  absl::StatusOr<SpmdResult> r = RunRule(rule, {S({4, 4}, {0, 0})}, {2});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("test_op"));
  EXPECT_THAT(r.status().message(), HasSubstr("[0,0]"));
  r = RunRule(rule, {S({4, 4, 4}, {0, -1, -1})}, {2});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("test_op: x (operand 0)"));
  EXPECT_THAT(r.status().message(), HasSubstr("\"ab\""));
  r = RunRule(rule, {S({4, 4}, {-1, 2})}, {2, 2});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("out of range"));
  r = RunRule(rule, {}, {2});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("test_op: expected 1 inputs, got 0"));
}

TEST(InferEinsumReverse, MergesOutputsOnlyAndNeverInfersPartial) {
  const EinsumRule rule = Rule({"mk", "kn"}, {"mn"}, PartialPolicy::Linear({0, 1}));
  const AttributeMap attrs;
  absl::StatusOr<SpmdResult> r = InferEinsumReverse(rule, {S({4, 4}, {-1, 0}), S({4, 4}, {-1, -1})},
                                                    {S({4, 4}, {1, 0}, {})}, SpmdContext{{2, 2}, attrs});
  EXPECT_EQ(Print(r), "[1,-1], [-1,0] -> [1,0]");
}

TEST(DescribeEinsum, Segments) {
  EinsumRule rule = Rule({"mk", "kn"}, {"mn"}, PartialPolicy::Linear({0, 1}));
  EXPECT_EQ(DescribeEinsum(rule), "mk,kn->mn  k→Partial  pass P: x|y");
  rule.contracted = ReduceType::kAvg;
  rule.replicated = "m";
  rule.partial = PartialPolicy::Movement({0, 1}, PartialPolicy::Mode::kAlike);
  EXPECT_EQ(DescribeEinsum(rule), "mk,kn->mn  k→Partial(avg)  m→Replicate  pass P(any): x&y");
  EXPECT_EQ(DescribeEinsum(Rule({"ab"}, {"ab"})), "ab->ab");
}

}  // namespace
}  // namespace pdist::ir::spmd
