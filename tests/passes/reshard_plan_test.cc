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
                    Kind::kMakePartial, Kind::kSendRecv, Kind::kRemesh}) {
    EXPECT_EQ(std::count_if(ReshardPrimitives().begin(), ReshardPrimitives().end(),
                            [&](const ReshardPrimitive& p) { return p.kind == kind; }),
              1)
        << ReshardStepName(kind);
    const ReshardPrimitive& p = ReshardPrimitiveOf(kind);
    EXPECT_EQ(p.phase != 0, static_cast<bool>(p.applies) && static_cast<bool>(p.make) && static_cast<bool>(p.lower))
        << p.name;
  }
  EXPECT_EQ(ReshardPrimitives().size(), 8u);
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

// A Partial that reduce-scatters into its target goes first: the all-reduce after it moves a
// shard, not the whole tensor.
TEST(ReshardPlanTest, ReduceScattersComeBeforeAllReduces) {
  const ir::ProcessMesh mesh = ir::ProcessMesh::Range({2, 2}, {"dp", "mp"});
  EXPECT_EQ(Plan(mesh, {P, P}, {R, S(0)}),
            "PP → PS(0) → RS(0) : reduce_scatter(mesh dim 1, axis 0, sum) all_reduce(mesh dim 0, sum)");
}

// Hybrid ZeRO: updates on [dp_replica, dp_shard, mp], the rest of the step on [dp, mp], both over
// ranks 0..7. Every move is planned on one of the two meshes with a free remesh at an end.
TEST(ReshardPlanTest, BetweenAMeshAndItsSplitTheStepsRunOnOneOfThem) {
  const ir::ProcessMesh coarse = ir::ProcessMesh::Range({4, 2}, {"dp", "mp"});
  const ir::ProcessMesh fine = ir::ProcessMesh::Range({2, 2, 2}, {"dp_replica", "dp_shard", "mp"});
  auto plan = [&](const ir::ProcessMesh& from_mesh, std::vector<Placement> from, const ir::ProcessMesh& to_mesh,
                  std::vector<Placement> to) {
    auto p = PlanReshard(Attr(from_mesh, 2, from), Attr(to_mesh, 2, to), {8, 16});
    if (!p.ok()) return std::string(p.status().message());
    std::string kinds;
    for (const ReshardStep& s : p->steps) absl::StrAppend(&kinds, " ", ReshardStepName(s.kind));
    return absl::StrCat(p->ToString(), " :", kinds);
  };
  // The gradient: reduce-scattered over the shards, then its shard all-reduced over the replicas.
  EXPECT_EQ(plan(coarse, {P, S(1)}, fine, {R, S(0), S(1)}),
            "PS(1) → PPS(1)@2x2x2 → PS(0)S(1)@2x2x2 → RS(0)S(1)@2x2x2 : remesh reduce_scatter all_reduce");
  // The updated slice gathered over the shards alone (every replica holds it already).
  EXPECT_EQ(plan(fine, {R, S(0), S(1)}, coarse, {R, S(1)}), "RS(0)S(1) → RRS(1) → RS(1)@4x2 : all_gather remesh");
  // The whole parameter sliced for the update: no communication at all.
  EXPECT_EQ(plan(coarse, {R, R}, fine, {R, S(0), R}), "RR → RRR@2x2x2 → RS(0)R@2x2x2 : remesh slice");
  // A shard over half of dp to a shard over all of it has no common mesh: the general move.
  EXPECT_EQ(plan(fine, {R, S(0), R}, coarse, {S(0), R}),
            "RS(0)R → RRR → RR@4x2 → S(0)R@4x2 : all_gather send_recv slice");
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
