// Remesh: a distribution carried to a mesh that splits one of its dims (and back) must leave every
// rank the same piece and the same partial-sum group; checked on every rank for every placement
// of a 2-d tensor on a [4,2] mesh, and the placements that have no counterpart are refused.
#include "ir/dist/remesh.h"

#include <algorithm>

#include "gtest/gtest.h"
#include "ir/dist/local_slice.h"

namespace pdist::ir {
namespace {

const ProcessMesh kCoarse = ProcessMesh::Range({4, 2}, {"dp", "mp"});
const ProcessMesh kFine = ProcessMesh::Range({2, 2, 2}, {"dp_replica", "dp_shard", "mp"});

// The ranks whose pieces `rank`'s piece is summed with: those that differ only along partial dims.
std::vector<int64_t> PartialGroup(const DistAttr& attr, int64_t rank) {
  std::vector<int64_t> dims;
  for (const auto& [m, reduce] : attr.partial) dims.push_back(m);
  std::vector<int64_t> group = attr.mesh.GroupAlong(dims, rank);
  std::sort(group.begin(), group.end());
  return group;
}

void ExpectSamePieces(const DistAttr& a, const DistAttr& b, const Shape& shape) {
  for (int64_t rank = 0; rank < a.mesh.size(); ++rank) {
    auto x = SliceOf(a, shape, rank), y = SliceOf(b, shape, rank);
    ASSERT_TRUE(x.ok() && y.ok());
    EXPECT_EQ(x->offsets, y->offsets) << a.ToString() << " vs " << b.ToString() << ", rank " << rank;
    EXPECT_EQ(x->sizes, y->sizes) << a.ToString() << ", rank " << rank;
    EXPECT_EQ(PartialGroup(a, rank), PartialGroup(b, rank)) << a.ToString() << ", rank " << rank;
  }
}

TEST(RemeshTest, FindsTheSplitDim) {
  EXPECT_EQ(SplitDimOf(kCoarse, kFine), 0);
  EXPECT_EQ(SplitDimOf(ProcessMesh::Range({2, 4}, {"mp", "dp"}), ProcessMesh::Range({2, 2, 2}, {"mp", "a", "b"})), 1);
  EXPECT_EQ(SplitDimOf(kFine, kCoarse), std::nullopt);  // the other way round
  // Other processes, or another name for a dim that is not split: not the same grid.
  EXPECT_EQ(SplitDimOf(kCoarse, *ProcessMesh::Create({2, 2, 2}, {7, 6, 5, 4, 3, 2, 1, 0}, {"a", "b", "mp"})), std::nullopt);
  EXPECT_EQ(SplitDimOf(kCoarse, ProcessMesh::Range({2, 2, 2}, {"a", "b", "tp"})), std::nullopt);
}

TEST(RemeshTest, EveryCoarsePlacementKeepsItsPiecesOnTheFineMesh) {
  const Shape shape = {8, 6};
  const std::vector<Placement> choices = {Placement::Replicate(), Placement::Partial(), Placement::Shard(0),
                                          Placement::Shard(1)};
  int carried = 0;
  for (const Placement& dp : choices) {
    for (const Placement& mp : choices) {
      auto coarse = DistAttr::FromPlacements(kCoarse, 2, {dp, mp});
      if (!coarse.ok() || !coarse->Verify(shape).ok()) continue;
      std::optional<DistAttr> fine = Remesh(*coarse, kFine);
      if (dp.is_shard()) {  // a shard over the whole of dp would be a shard over both halves
        EXPECT_EQ(fine, std::nullopt) << coarse->ToString();
        continue;
      }
      ASSERT_TRUE(fine.has_value()) << coarse->ToString();
      EXPECT_EQ(fine->mesh, kFine);
      ExpectSamePieces(*coarse, *fine, shape);
      EXPECT_EQ(Remesh(*fine, kCoarse), std::optional<DistAttr>(*coarse)) << "back from " << fine->ToString();
      ++carried;
    }
  }
  EXPECT_EQ(carried, 8);  // {R, P} along dp × {R, P, S(0), S(1)} along mp
}

TEST(RemeshTest, AShardOverHalfOfTheSplitDimHasNoCoarseCounterpart) {
  auto half = DistAttr::FromPlacements(kFine, 2, {Placement::Replicate(), Placement::Shard(0), Placement::Replicate()});
  ASSERT_TRUE(half.ok());
  EXPECT_EQ(Remesh(*half, kCoarse), std::nullopt);
  auto one_partial = DistAttr::FromPlacements(kFine, 2, {Placement::Partial(), Placement::Replicate(), Placement::Replicate()});
  ASSERT_TRUE(one_partial.ok());
  EXPECT_EQ(Remesh(*one_partial, kCoarse), std::nullopt);  // partial over the replicas alone
  auto mixed = DistAttr::FromPlacements(kFine, 2, {Placement::Partial(), Placement::Partial(ReduceType::kMax),
                                                   Placement::Replicate()});
  ASSERT_TRUE(mixed.ok());
  EXPECT_EQ(Remesh(*mixed, kCoarse), std::nullopt);  // two reductions cannot be one
  EXPECT_EQ(Remesh(*half, ProcessMesh::Range({8}, {"all"})), std::nullopt);  // not a split of one dim
}

}  // namespace
}  // namespace pdist::ir
