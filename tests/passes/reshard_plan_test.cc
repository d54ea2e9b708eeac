// Reshard planner: the primitive steps and their printed chain for every kind of move, on 1-D
// and 2-D meshes, the cache, and the errors. (Moves between meshes: tests/engine/mesh_to_mesh_test.cc.)
#include "passes/reshard_plan.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "passes/reshard/reshard_primitive.h"

namespace pdist::passes {
namespace {

using ir::Placement;

ir::DistAttr Attr(const ir::ProcessMesh& mesh, int64_t rank, std::vector<Placement> placements) {
  return *ir::DistAttr::FromPlacements(mesh, rank, placements);
}

std::string Plan(const ir::ProcessMesh& mesh, std::vector<Placement> from, std::vector<Placement> to,
                 ir::Shape shape = {8, 16}) {
  auto plan = PlanReshard(Attr(mesh, static_cast<int64_t>(shape.size()), from),
                          Attr(mesh, static_cast<int64_t>(shape.size()), to), shape);
  if (!plan.ok()) return std::string(plan.status().message());
  std::string steps;
  for (const ReshardStep& s : plan->steps) absl::StrAppend(&steps, " ", s.ToString());
  return absl::StrCat(plan->ToString(), " :", steps);
}

const Placement R = Placement::Replicate();
const Placement P = Placement::Partial();
Placement S(int64_t d) { return Placement::Shard(d); }

// Every step kind has exactly one primitive (passes/reshard/), and every primitive the planner
// may choose per mesh dim can be lowered on a rank.
TEST(ReshardPlanTest, EveryStepKindHasOnePrimitive) {
  using Kind = ReshardStep::Kind;
  for (Kind kind : {Kind::kAllReduce, Kind::kAllGather, Kind::kReduceScatter, Kind::kAllToAll, Kind::kSlice,
                    Kind::kMakePartial, Kind::kSendRecv}) {
    EXPECT_EQ(std::count_if(ReshardPrimitives().begin(), ReshardPrimitives().end(),
                            [&](const ReshardPrimitive& p) { return p.kind == kind; }),
              1)
        << ReshardStepName(kind);
    const ReshardPrimitive& p = ReshardPrimitiveOf(kind);
    EXPECT_EQ(p.phase != 0, static_cast<bool>(p.applies) && static_cast<bool>(p.make) && static_cast<bool>(p.lower))
        << p.name;
  }
  EXPECT_EQ(ReshardPrimitives().size(), 7u);
}

TEST(ReshardPlanTest, OneDimensionalMoves) {
  const ir::ProcessMesh mesh = ir::ProcessMesh::Range({2}, {"x"});
  EXPECT_EQ(Plan(mesh, {S(0)}, {R}), "S(0) → R : all_gather(mesh dim 0, axis 0)");
  EXPECT_EQ(Plan(mesh, {R}, {S(1)}), "R → S(1) : slice(mesh dim 0, axis 1)");
  EXPECT_EQ(Plan(mesh, {P}, {R}), "P → R : all_reduce(mesh dim 0, sum)");
  EXPECT_EQ(Plan(mesh, {P}, {S(0)}), "P → S(0) : reduce_scatter(mesh dim 0, axis 0, sum)");
  EXPECT_EQ(Plan(mesh, {S(0)}, {S(1)}), "S(0) → S(1) : all_to_all(mesh dim 0, axis 0 → 1)");
  EXPECT_EQ(Plan(mesh, {R}, {P}), "R → P : make_partial(mesh dim 0, sum)");
  EXPECT_EQ(Plan(mesh, {P}, {Placement::Partial(ir::ReduceType::kAvg)}),
            "P → R → P(avg) : all_reduce(mesh dim 0, sum) make_partial(mesh dim 0, avg)");
  EXPECT_EQ(Plan(mesh, {S(1)}, {S(1)}), "S(1) :");
}

TEST(ReshardPlanTest, TwoDimensionalMoves) {
  const ir::ProcessMesh mesh = ir::ProcessMesh::Range({2, 2}, {"dp", "mp"});
  // The example of the issue: gather along dp, then slice along mp.
  EXPECT_EQ(Plan(mesh, {S(0), R}, {R, S(1)}), "S(0)R → RR → RS(1) : all_gather(mesh dim 0, axis 0) slice(mesh dim 1, axis 1)");
  // Partial on mp while sharded on dp: one all-reduce within each mp group.
  EXPECT_EQ(Plan(mesh, {S(0), P}, {S(0), R}), "S(0)P → S(0)R : all_reduce(mesh dim 1, sum)");
  // A reduce-scatter lands on a tensor dim no other mesh dim holds.
  EXPECT_EQ(Plan(mesh, {S(0), P}, {S(0), S(1)}), "S(0)P → S(0)S(1) : reduce_scatter(mesh dim 1, axis 1, sum)");
  // Once dp has let go of dim 0, mp can reduce-scatter onto it.
  EXPECT_EQ(Plan(mesh, {S(0), P}, {R, S(0)}),
            "S(0)P → RP → RS(0) : all_gather(mesh dim 0, axis 0) reduce_scatter(mesh dim 1, axis 0, sum)");
  EXPECT_EQ(Plan(mesh, {P, P}, {R, R}), "PP → RP → RR : all_reduce(mesh dim 0, sum) all_reduce(mesh dim 1, sum)");
  // Swapping two shards: dp gathers (its target dim is held), mp moves by all-to-all, dp slices.
  EXPECT_EQ(Plan(mesh, {S(1), S(0)}, {S(0), S(1)}),
            "S(1)S(0) → RS(0) → RS(1) → S(0)S(1) : all_gather(mesh dim 0, axis 1) all_to_all(mesh dim 1, axis 0 → 1) "
            "slice(mesh dim 0, axis 0)");
}

TEST(ReshardPlanTest, UnevenShardsAreRejected) {
  const ir::ProcessMesh mesh = ir::ProcessMesh::Range({4}, {"mp"});
  EXPECT_EQ(Plan(mesh, {R}, {S(0)}, {6, 8}),
            "reshard target: tensor dim 0 of size 6 does not split evenly over mesh dim mp (4 ranks); uneven shards are "
            "not supported");
}

TEST(ReshardPlanTest, CacheReturnsTheSamePlanOnce) {
  const ir::ProcessMesh mesh = ir::ProcessMesh::Range({2}, {"x"});
  ReshardPlanCache cache;
  auto a = cache.Get(Attr(mesh, 2, {S(0)}), Attr(mesh, 2, {R}), {8, 8});
  auto b = cache.Get(Attr(mesh, 2, {S(0)}), Attr(mesh, 2, {R}), {8, 8});
  auto c = cache.Get(Attr(mesh, 2, {S(0)}), Attr(mesh, 2, {R}), {8, 16});
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->ToString(), b->ToString());
  EXPECT_EQ(cache.size(), 2u);
}

}  // namespace
}  // namespace pdist::passes
