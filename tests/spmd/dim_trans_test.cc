// DimTrans (ir/spmd/dim_trans.h): construction, MakeReshapeDimTrans, InferFromDimTrans.
#include "ir/spmd/dim_trans.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pdist::ir::spmd {
namespace {

using ::testing::HasSubstr;

std::string Trans(const Shape& src, const Shape& tgt) {
  absl::StatusOr<std::vector<DimTrans>> dims = MakeReshapeDimTrans(src, tgt);
  return dims.ok() ? DimTransListToString(*dims) : std::string(dims.status().message());
}

// "input -> output" mappings after InferFromDimTrans.
std::string Infer(const Shape& src, const DimsMapping& mapping, const Shape& tgt, const std::vector<int64_t>& mesh) {
  absl::StatusOr<std::vector<DimTrans>> dims = MakeReshapeDimTrans(src, tgt);
  if (!dims.ok()) return std::string(dims.status().message());
  const DimTransMappings m = InferFromDimTrans(src, mapping, *dims, mesh);
  return DimsMappingToString(m.input) + " -> " + DimsMappingToString(m.output);
}

TEST(DimTrans, Constructors) {
  EXPECT_EQ(DimTrans::Flatten({}), DimTrans::Singleton());
  EXPECT_EQ(DimTrans::Flatten({DimTrans::InputDim(2)}), DimTrans::InputDim(2));
  EXPECT_EQ(DimTrans::Split(DimTrans::InputDim(1), {8}, 0), DimTrans::InputDim(1));
  EXPECT_EQ(DimTrans::Split(DimTrans::InputDim(1), {1, 8}, 0), DimTrans::Singleton());
  const DimTrans flat = DimTrans::Flatten({DimTrans::InputDim(0), DimTrans::InputDim(1)});
  EXPECT_EQ(flat.ToString(), "(ab)");
  EXPECT_EQ(DimTrans::Split(flat, {4, 18}, 1).ToString(), "split((ab),[4,18],1)");
  EXPECT_EQ(DimTrans::Singleton().ToString(), "1");
}

TEST(MakeReshapeDimTrans, PaddleExample) {
  EXPECT_EQ(Trans({6, 12, 48, 24}, {1, 72, 48, 4, 6}), "1,(ab),c,split(d,[4,6],0),split(d,[4,6],1)");
}

TEST(MakeReshapeDimTrans, InfersMinusOne) {
  EXPECT_EQ(Trans({8, 32, 64}, {8, 32, -1, 16}), "a,b,split(c,[4,16],0),split(c,[4,16],1)");
  EXPECT_EQ(Trans({8, 32, 64}, {-1}), "(abc)");
}

TEST(MakeReshapeDimTrans, SizeOneDimsOnEitherSide) {
  EXPECT_EQ(Trans({8, 1, 16}, {8, 16}), "a,c");         // squeeze
  EXPECT_EQ(Trans({8, 16}, {1, 8, 1, 16}), "1,a,1,b");  // unsqueeze
  EXPECT_EQ(Trans({1, 1}, {1}), "1");
  EXPECT_EQ(Trans({}, {1, 1}), "1,1");
  EXPECT_EQ(Trans({4, 1, 6}, {24}), "(ac)");
}

TEST(MakeReshapeDimTrans, MixedGroups) {
  // [6,4] → [2,12]: 6 and 4 regroup into 2 × 12 as one group.
  EXPECT_EQ(Trans({6, 4}, {2, 12}), "split((ab),[2,12],0),split((ab),[2,12],1)");
}

TEST(MakeReshapeDimTrans, Errors) {
  EXPECT_THAT(Trans({8, 4}, {-1, -1}), HasSubstr("more than one -1"));
  EXPECT_THAT(Trans({8, 4}, {5, 6}), HasSubstr("cannot reshape [8,4] into [5,6]"));
  EXPECT_THAT(Trans({8, 4}, {-1, 5}), HasSubstr("cannot be inferred"));
  EXPECT_THAT(Trans({8, 0}, {0}), HasSubstr("positive"));
}

TEST(InferFromDimTrans, PaddleExamplesOnMesh2x3) {
  // The leftmost flattened dim keeps its sharding; InputDim copies.
  EXPECT_EQ(Infer({6, 12, 48, 24}, {0, -1, 1, -1}, {1, 72, 48, 4, 6}, {2, 3}), "[0,-1,1,-1] -> [-1,0,1,-1,-1]");
  // 12 is not leftmost in flatten(6,12); split part 0 (4) is not divisible by 3.
  EXPECT_EQ(Infer({6, 12, 48, 24}, {-1, 0, -1, 1}, {1, 72, 48, 4, 6}, {2, 3}), "[-1,-1,-1,-1] -> [-1,-1,-1,-1,-1]");
  // [-1,-1,3072] [0,-1,1] → [0,0,-1,192] (Paddle's dynamic dims stand at 256): 16 % 3 ≠ 0.
  EXPECT_EQ(Infer({256, 256, 3072}, {0, -1, 1}, {256, 256, -1, 192}, {2, 3}), "[0,-1,-1] -> [0,-1,-1,-1]");
}

TEST(InferFromDimTrans, SplitPartZeroInheritsWhenDivisible) {
  EXPECT_EQ(Infer({8, 32, 64}, {0, -1, 1}, {8, 32, 4, 16}, {2, 2}), "[0,-1,1] -> [0,-1,1,-1]");
  EXPECT_EQ(Infer({8, 32, 64}, {0, -1, 1}, {8, 32, 4, 16}, {2, 8}), "[0,-1,-1] -> [0,-1,-1,-1]");
}

TEST(InferFromDimTrans, FlattenThenSplit) {
  // [6,4] → [2,12] on mesh [2]: a (6) is leftmost of (ab); part 0 (2) divides by 2.
  EXPECT_EQ(Infer({6, 4}, {0, -1}, {2, 12}, {2}), "[0,-1] -> [0,-1]");
  EXPECT_EQ(Infer({6, 4}, {-1, 0}, {2, 12}, {2}), "[-1,-1] -> [-1,-1]");
  EXPECT_EQ(Infer({6, 4}, {0, -1}, {2, 12}, {4}), "[-1,-1] -> [-1,-1]");  // 2 % 4 ≠ 0
}

TEST(InferFromDimTrans, SizeOneDimsDisappear) {
  EXPECT_EQ(Infer({8, 1, 16}, {0, -1, 1}, {8, 16}, {2, 2}), "[0,-1,1] -> [0,1]");
  EXPECT_EQ(Infer({8, 16}, {1, 0}, {1, 8, 1, 16}, {2, 2}), "[1,0] -> [-1,1,-1,0]");
  // A sharded size-1 dim has nowhere to go.
  EXPECT_EQ(Infer({1, 16}, {0, -1}, {16}, {2}), "[-1,-1] -> [-1]");
}

}  // namespace
}  // namespace pdist::ir::spmd
