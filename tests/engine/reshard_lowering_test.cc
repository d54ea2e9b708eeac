// Every reshard lowering moves the right numbers: for all pairs of distributions of an f64
// [4,8] tensor on a 1-D mesh of 2 and a 2×2 mesh (Replicate, Shard(0), Shard(1), Partial(sum)
// per mesh dim), the partitioned program run on in-process ranks gives each rank exactly its
// piece of the target (for a Partial target: pieces that sum to it).
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "engine/shard_io.h"
#include "ir/builder.h"
#include "passes/reshard_plan.h"
#include "tests/engine/rank_threads.h"

namespace pdist::engine {
namespace {

using ir::Placement;

const ir::Shape kShape = {4, 8};

// Every placement list on `mesh` for a rank-2 tensor without a tensor dim sharded twice.
std::vector<std::vector<Placement>> AllPlacements(const ir::ProcessMesh& mesh) {
  const std::vector<Placement> one = {Placement::Replicate(), Placement::Shard(0), Placement::Shard(1),
                                      Placement::Partial()};
  std::vector<std::vector<Placement>> all = {{}};
  for (int64_t m = 0; m < mesh.ndim(); ++m) {
    std::vector<std::vector<Placement>> next;
    for (const auto& prefix : all) {
      for (const Placement& p : one) {
        bool clash = false;
        for (const Placement& q : prefix) clash = clash || (p.is_shard() && q.is_shard() && p.dim == q.dim);
        if (clash) continue;
        auto extended = prefix;
        extended.push_back(p);
        next.push_back(extended);
      }
    }
    all = std::move(next);
  }
  return all;
}

ir::DistAttr WithoutPartial(ir::DistAttr attr) {
  attr.partial.clear();
  return attr;
}

std::vector<int64_t> PartialDims(const ir::DistAttr& attr) {
  std::vector<int64_t> dims;
  for (const auto& [m, reduce] : attr.partial) dims.push_back(m);
  return dims;
}

// A Partial piece: the slice scaled so that the pieces of one partial group sum to the slice.
exec::Tensor PieceFor(const exec::Tensor& whole, const ir::DistAttr& attr, int64_t rank) {
  exec::Tensor slice = *SliceForRank(whole, WithoutPartial(attr), rank);
  double weight = 1;
  const std::vector<int64_t> coord = attr.mesh.CoordinateOf(rank);
  for (int64_t m : PartialDims(attr)) {
    const double n = static_cast<double>(attr.mesh.dim_size(m));
    weight *= static_cast<double>(coord[static_cast<size_t>(m)] + 1) / (n * (n + 1) / 2);
  }
  std::vector<double> values = exec::TensorToDoubles(slice);
  for (double& v : values) v *= weight;
  return exec::TensorFromDoubles(slice.type(), values);
}

// Builds x (source) → reshard → y (target) → out = scale(y, 1) and returns out's id.
int64_t BuildReshard(ir::Program& program, const ir::DistAttr& source, const ir::DistAttr& target) {
  ir::Builder b(&program);
  ir::Value* x = b.Data("x", {kShape, ir::DataType::kFloat64});
  x->set_dist_attr(source);
  ir::Value* y = *b.Op1("reshard", {x});
  y->set_dist_attr(target);
  ir::Value* out = *b.Op1("scale", {y}, {{"scale", 1.0}});
  out->set_dist_attr(target);
  return out->id();
}

void CheckAllPairs(const ir::ProcessMesh& mesh) {
  std::vector<double> values;
  for (int64_t i = 0; i < 32; ++i) values.push_back(0.5 + 0.37 * static_cast<double>((i * 7) % 13) - 0.01 * i);
  const exec::Tensor whole = exec::TensorFromDoubles({kShape, ir::DataType::kFloat64}, values);
  const int world = static_cast<int>(mesh.size());
  int checked = 0;
  for (const auto& from : AllPlacements(mesh)) {
    for (const auto& to : AllPlacements(mesh)) {
      const ir::DistAttr source = *ir::DistAttr::FromPlacements(mesh, 2, from);
      const ir::DistAttr target = *ir::DistAttr::FromPlacements(mesh, 2, to);
      const std::string what = absl::StrCat(ir::PlacementsToString(from), " → ", ir::PlacementsToString(to), " on ",
                                            mesh.ToString(), ": ", passes::PlanReshard(source, target, kShape)->ToString());
      ir::Program program;
      const int64_t out = BuildReshard(program, source, target);
      auto results = testing::RunPartitioned(
          program, world, [&](int64_t r) { return exec::Feeds{{"x", PieceFor(whole, source, r)}}; }, out);
      for (int r = 0; r < world; ++r) {
        ASSERT_TRUE(results[static_cast<size_t>(r)].ok()) << what << ": " << results[static_cast<size_t>(r)].status();
        // Sum the pieces of this rank's partial group (just its own piece when nothing is partial).
        exec::Tensor sum = results[static_cast<size_t>(r)]->Clone();
        std::vector<double> total = exec::TensorToDoubles(sum);
        for (int64_t peer : mesh.GroupAlong(PartialDims(target), r)) {
          if (peer == r || PartialDims(target).empty()) continue;
          const std::vector<double> theirs = exec::TensorToDoubles(*results[static_cast<size_t>(peer)]);
          for (size_t i = 0; i < total.size(); ++i) total[i] += theirs[i];
        }
        const std::vector<double> want = exec::TensorToDoubles(*SliceForRank(whole, WithoutPartial(target), r));
        ASSERT_EQ(total.size(), want.size()) << what;
        for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(total[i], want[i], 1e-12) << what << ", rank " << r << ", element " << i;
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, static_cast<int>(AllPlacements(mesh).size() * AllPlacements(mesh).size()));
}

TEST(ReshardLoweringTest, EveryPairOnOneDimensionalMesh) { CheckAllPairs(ir::ProcessMesh::Range({2}, {"x"})); }

TEST(ReshardLoweringTest, EveryPairOnTwoByTwoMesh) { CheckAllPairs(ir::ProcessMesh::Range({2, 2}, {"dp", "mp"})); }

TEST(ReshardLoweringTest, PartialAverageBecomesTheMean) {
  const ir::ProcessMesh mesh = ir::ProcessMesh::Range({2}, {"dp"});
  const ir::DistAttr source = *ir::DistAttr::FromPlacements(mesh, 2, {Placement::Partial(ir::ReduceType::kAvg)});
  const ir::DistAttr target = *ir::DistAttr::FromPlacements(mesh, 2, {Placement::Shard(1)});
  ir::Program program;
  const int64_t out = BuildReshard(program, source, target);
  auto results = testing::RunPartitioned(
      program, 2,
      [&](int64_t r) { return exec::Feeds{{"x", exec::TensorFromDoubles({kShape, ir::DataType::kFloat64},
                                                                        std::vector<double>(32, r == 0 ? 1.0 : 3.0))}}; },
      out);
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(results[static_cast<size_t>(r)].ok()) << results[static_cast<size_t>(r)].status();
    EXPECT_EQ(results[static_cast<size_t>(r)]->shape(), (ir::Shape{4, 4}));
    for (double v : exec::TensorToDoubles(*results[static_cast<size_t>(r)])) EXPECT_DOUBLE_EQ(v, 2.0);
  }
}

}  // namespace
}  // namespace pdist::engine
