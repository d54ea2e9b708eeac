// SPMD rules of reshape, squeeze, unsqueeze, transpose, split, concat, slice and slice_grad.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/spmd/spmd_test_util.h"

namespace pdist::nn_spmd_test {
namespace {

using ::testing::HasSubstr;

ir::AttributeMap Ints(const char* name, std::vector<int64_t> values) { return {{name, std::move(values)}}; }

// --- reshape -----------------------------------------------------------------------------------

TEST(ReshapeSpmd, PaddleExamples) {
  const ir::AttributeMap to5 = Ints("shape", {1, 72, 48, 4, 6});
  EXPECT_EQ(Print(Forward("reshape", {S({6, 12, 48, 24}, {0, -1, 1, -1})}, {2, 3}, to5)),
            "[0,-1,1,-1] -> [-1,0,1,-1,-1]");
  EXPECT_EQ(Print(Forward("reshape", {S({6, 12, 48, 24}, {-1, 0, -1, 1})}, {2, 3}, to5)),
            "[-1,-1,-1,-1] -> [-1,-1,-1,-1,-1]");
  // [-1,-1,3072] (Paddle's dynamic dims stand at 256) [0,-1,1] → [0,0,-1,192]: 16 % 3 ≠ 0.
  EXPECT_EQ(Print(Forward("reshape", {S({256, 256, 3072}, {0, -1, 1})}, {2, 3}, Ints("shape", {0, 0, -1, 192}))),
            "[0,-1,-1] -> [0,-1,-1,-1]");
}

TEST(ReshapeSpmd, SplitHeadsAndFlatten) {
  absl::StatusOr<ir::SpmdResult> r =
      Forward("reshape", {S({8, 32, 64}, {0, -1, 1})}, {2, 2}, Ints("shape", {0, 0, 4, 16}));
  EXPECT_EQ(Print(r), "[0,-1,1] -> [0,-1,1,-1]");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->outputs[0].shape, (Shape{8, 32, 4, 16}));
  // Only the outermost dim of a flattened group keeps its sharding.
  EXPECT_EQ(Print(Forward("reshape", {S({8, 32, 64}, {0, 1, -1})}, {2, 2}, Ints("shape", {256, 64}))),
            "[0,-1,-1] -> [0,-1]");
  EXPECT_EQ(Print(Forward("reshape", {S({8, 32, 64}, {-1, 1, -1})}, {2, 2}, Ints("shape", {-1}))),
            "[-1,-1,-1] -> [-1]");
}

TEST(ReshapeSpmd, PartialPassesAnyType) {
  EXPECT_EQ(Print(Forward("reshape", {S({8, 32, 64}, {0, -1, -1}, Sum(1))}, {2, 2}, Ints("shape", {8, 2048}))),
            "[0,-1,-1] {1: sum} -> [0,-1] {1: sum}");
  EXPECT_EQ(Print(Forward("reshape", {S({8, 32}, {-1, -1}, {{0, ReduceType::kMax}})}, {2}, Ints("shape", {256}))),
            "[-1,-1] {0: max} -> [-1] {0: max}");
}

TEST(ReshapeSpmd, Reverse) {
  const ir::AttributeMap to5 = Ints("shape", {1, 72, 48, 4, 6});
  EXPECT_EQ(Print(Reverse("reshape", {S({6, 12, 48, 24}, {-1, -1, -1, -1})}, {S({1, 72, 48, 4, 6}, {-1, 0, 1, -1, -1})},
                          {2, 3}, to5)),
            "[0,-1,1,-1] -> [-1,0,1,-1,-1]");
  // out [24] sharded 3 ways cannot split back into [4,6] with the 4 sharded: both replicated.
  EXPECT_EQ(Print(Reverse("reshape", {S({4, 6}, {-1, -1})}, {S({24}, {1})}, {2, 3}, Ints("shape", {24}))),
            "[-1,-1] -> [-1]");
  // Partial outputs are not propagated back.
  EXPECT_EQ(Print(Reverse("reshape", {S({8, 32}, {-1, -1})}, {S({256}, {0}, Sum(1))}, {2, 2}, Ints("shape", {256}))),
            "[0,-1] -> [0]");
}

TEST(ReshapeSpmd, BadInput) {
  EXPECT_THAT(ErrorOf(Forward("reshape", {S({8, 32}, {-1, -1})}, {2}, Ints("shape", {5, -1}))),
              HasSubstr("reshape: cannot infer"));
  EXPECT_THAT(ErrorOf(Forward("reshape", {S({8, 32}, {0, 0})}, {2}, Ints("shape", {256}))),
              HasSubstr("reshape: inputs 0"));
}

TEST(SqueezeSpmd, ForwardAndReverse) {
  EXPECT_EQ(Print(Forward("squeeze", {S({8, 1, 16}, {0, -1, 1})}, {2, 2}, Ints("axis", {1}))), "[0,-1,1] -> [0,1]");
  EXPECT_EQ(Print(Forward("squeeze", {S({1, 8, 1}, {-1, 0, -1})}, {2}, Ints("axis", {}))), "[-1,0,-1] -> [0]");
  EXPECT_EQ(Print(Reverse("squeeze", {S({8, 1, 16}, {-1, -1, -1})}, {S({8, 16}, {1, 0})}, {2, 2}, Ints("axis", {1}))),
            "[1,-1,0] -> [1,0]");
}

TEST(UnsqueezeSpmd, ForwardAndReverse) {
  EXPECT_EQ(Print(Forward("unsqueeze", {S({8, 16}, {1, 0})}, {2, 2}, Ints("axis", {0, 2}))), "[1,0] -> [-1,1,-1,0]");
  EXPECT_EQ(Print(Reverse("unsqueeze", {S({8, 16}, {-1, -1})}, {S({1, 8, 16}, {-1, 0, 1})}, {2, 2}, Ints("axis", {0}))),
            "[0,1] -> [-1,0,1]");
}

// --- transpose ---------------------------------------------------------------------------------

TEST(TransposeSpmd, PermutesTheMapping) {
  EXPECT_EQ(Print(Forward("transpose", {S({8, 16, 32}, {0, -1, 1})}, {2, 2}, Ints("perm", {2, 0, 1}))),
            "[0,-1,1] -> [1,0,-1]");
  EXPECT_EQ(Print(Forward("transpose", {S({8, 16, 32}, {0, -1, 1})}, {2, 2}, Ints("perm", {-1, 0, 1}))),
            "[0,-1,1] -> [1,0,-1]");
  // Reverse inverts the permutation.
  EXPECT_EQ(Print(Reverse("transpose", {S({8, 16, 32}, {-1, -1, -1})}, {S({32, 8, 16}, {1, 0, -1})}, {2, 2},
                          Ints("perm", {2, 0, 1}))),
            "[0,-1,1] -> [1,0,-1]");
  EXPECT_EQ(Print(Forward("transpose", {S({8, 16}, {-1, 1}, {{0, ReduceType::kMax}})}, {2, 2}, Ints("perm", {1, 0}))),
            "[-1,1] {0: max} -> [1,-1] {0: max}");
}

TEST(TransposeSpmd, BadPerm) {
  EXPECT_THAT(ErrorOf(Forward("transpose", {S({8, 16, 32}, {-1, -1, -1})}, {2}, Ints("perm", {0, 0, 1}))),
              HasSubstr("transpose: perm [0,0,1] is not a permutation"));
  EXPECT_THAT(ErrorOf(Forward("transpose", {S({8, 16, 32}, {-1, -1, -1})}, {2}, Ints("perm", {0, 1}))),
              HasSubstr("transpose: perm [0,1] has 2 entries"));
}

// --- split -------------------------------------------------------------------------------------

TEST(SplitSpmd, SplitAxisIsReplicated) {
  const ir::AttributeMap attrs = {{"sections", std::vector<int64_t>{4, 4, 4}}, {"axis", int64_t{1}}};
  absl::StatusOr<ir::SpmdResult> r = Forward("split", {S({6, 12, 48}, {0, 1, -1})}, {2, 3}, attrs);
  EXPECT_EQ(Print(r), "[0,-1,-1] -> [0,-1,-1], [0,-1,-1], [0,-1,-1]");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->outputs[2].shape, (Shape{6, 4, 48}));
  EXPECT_EQ(Print(Forward("split_with_num", {S({6, 12, 48}, {1, 0, -1})}, {2, 3},
                          {{"num", int64_t{2}}, {"axis", int64_t{-1}}})),
            "[1,0,-1] -> [1,0,-1], [1,0,-1]");
  EXPECT_EQ(Print(Forward("split_with_num", {S({6, 12, 48}, {1, -1, -1}, Sum(0))}, {2, 3},
                          {{"num", int64_t{2}}, {"axis", int64_t{2}}})),
            "[1,-1,-1] {0: sum} -> [1,-1,-1] {0: sum}, [1,-1,-1] {0: sum}");
}

TEST(SplitSpmd, ReverseMergesEveryOutput) {
  // a on mesh dim 0 (first output) and c on mesh dim 0 (second output): a keeps it.
  const ir::AttributeMap attrs = {{"sections", std::vector<int64_t>{4, 8}}, {"axis", int64_t{1}}};
  EXPECT_EQ(Print(Reverse("split", {S({6, 12, 48}, {-1, -1, -1})},
                          {S({6, 4, 48}, {0, -1, -1}), S({6, 8, 48}, {-1, 1, 0})}, {2, 2}, attrs)),
            "[0,-1,-1] -> [0,-1,-1], [0,-1,-1]");
}

// --- concat ------------------------------------------------------------------------------------

TEST(ConcatSpmd, PaddleAlignExample) {
  // Paddle a.12: mesh [2,2], [-1,0,1], [-1,1,0], [-1,-1,0] on axis 0 → all [-1,1,0].
  absl::StatusOr<ir::SpmdResult> r =
      Forward("concat", {S({4, 16, 16}, {-1, 0, 1}), S({8, 16, 16}, {-1, 1, 0}), S({4, 16, 16}, {-1, -1, 0})}, {2, 2},
              {{"axis", int64_t{0}}});
  EXPECT_EQ(Print(r), "[-1,1,0], [-1,1,0], [-1,1,0] -> [-1,1,0]");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->outputs[0].shape, (Shape{16, 16, 16}));
}

TEST(ConcatSpmd, ConcatAxisIsReplicatedAndPartialNeedsAll) {
  EXPECT_EQ(Print(Forward("concat", {S({4, 16}, {0, 1}), S({4, 16}, {0, 1})}, {2, 2}, {{"axis", int64_t{0}}})),
            "[-1,1], [-1,1] -> [-1,1]");
  EXPECT_EQ(Print(Forward("concat", {S({4, 16}, {-1, 1}, Sum(0)), S({4, 16}, {-1, 1}, Sum(0))}, {2, 2},
                          {{"axis", int64_t{-1}}})),
            "[-1,-1] {0: sum}, [-1,-1] {0: sum} -> [-1,-1] {0: sum}");
  EXPECT_EQ(
      Print(Forward("concat", {S({4, 16}, {1, -1}, Sum(0)), S({4, 16}, {-1, -1})}, {2, 2}, {{"axis", int64_t{1}}})),
      "[1,-1], [1,-1] -> [1,-1]");
}

TEST(ConcatSpmd, Reverse) {
  EXPECT_EQ(Print(Reverse("concat", {S({4, 16, 16}, {-1, -1, -1}), S({8, 16, 16}, {-1, -1, -1})},
                          {S({12, 16, 16}, {0, 1, -1})}, {2, 2}, {{"axis", int64_t{0}}})),
            "[-1,1,-1], [-1,1,-1] -> [-1,1,-1]");
}

// --- slice / slice_grad ------------------------------------------------------------------------

ir::AttributeMap SliceAttrs(std::vector<int64_t> axes, std::vector<int64_t> starts, std::vector<int64_t> ends,
                            std::vector<int64_t> decrease = {}) {
  return {{"axes", std::move(axes)},
          {"starts", std::move(starts)},
          {"ends", std::move(ends)},
          {"decrease_axis", std::move(decrease)}};
}

TEST(SliceSpmd, SlicedAxesAreReplicated) {
  absl::StatusOr<ir::SpmdResult> r =
      Forward("slice", {S({8, 16, 32, 4}, {0, 1, -1, -1})}, {2, 2}, SliceAttrs({1}, {0}, {8}));
  EXPECT_EQ(Print(r), "[0,-1,-1,-1] -> [0,-1,-1,-1]");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->outputs[0].shape, (Shape{8, 8, 32, 4}));
  // decrease_axis drops the dim from out (Paddle's test keeps a 4-D mapping; pdist's out is 3-D).
  EXPECT_EQ(Print(Forward("slice", {S({8, 16, 32, 4}, {0, 1, -1, -1})}, {2, 2}, SliceAttrs({0}, {0}, {1}, {0}))),
            "[-1,1,-1,-1] -> [1,-1,-1]");
  EXPECT_EQ(Print(Forward("slice", {S({8, 16}, {-1, 1}, Sum(0))}, {2, 2}, SliceAttrs({0}, {2}, {4}))),
            "[-1,1] {0: sum} -> [-1,1] {0: sum}");
}

TEST(SliceSpmd, Reverse) {
  EXPECT_EQ(Print(Reverse("slice", {S({8, 16, 32, 4}, {-1, -1, -1, -1})}, {S({8, 8, 32, 4}, {0, -1, 1, -1})}, {2, 2},
                          SliceAttrs({1}, {0}, {8}))),
            "[0,-1,1,-1] -> [0,-1,1,-1]");
  EXPECT_EQ(Print(Reverse("slice", {S({8, 16, 32}, {-1, -1, -1})}, {S({16, 32}, {1, 0})}, {2, 2},
                          SliceAttrs({0}, {0}, {1}, {0}))),
            "[-1,1,0] -> [1,0]");
}

TEST(SliceGradSpmd, OutGradLeadsAndItsPartialPasses) {
  const ir::AttributeMap attrs = SliceAttrs({1}, {0}, {8});
  EXPECT_EQ(Print(Forward("slice_grad", {S({8, 16, 32}, {0, 1, -1}), S({8, 8, 32}, {-1, -1, 1})}, {2, 2}, attrs)),
            "[0,-1,1], [0,-1,1] -> [0,-1,1]");
  EXPECT_EQ(
      Print(Forward("slice_grad", {S({8, 16, 32}, {-1, -1, -1}), S({8, 8, 32}, {0, -1, -1}, Sum(1))}, {2, 2}, attrs)),
      "[0,-1,-1], [0,-1,-1] {1: sum} -> [0,-1,-1] {1: sum}");
  EXPECT_EQ(Print(Reverse("slice_grad", {S({8, 16, 32}, {-1, -1, -1}), S({8, 8, 32}, {-1, -1, -1})},
                          {S({8, 16, 32}, {0, 1, -1})}, {2, 2}, attrs)),
            "[0,-1,-1], [0,-1,-1] -> [0,-1,-1]");
}

}  // namespace
}  // namespace pdist::nn_spmd_test
