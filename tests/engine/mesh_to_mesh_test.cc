// Tensors that move between meshes (pipeline stages) go by send/recv: every placement pair
// between two meshes of one shape and of different shapes gives the target ranks their pieces,
// and a two-stage program (stage 1 on its own ranks, with data parallelism inside each stage)
// trains exactly like one rank.
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "engine/shard_io.h"
#include "ir/builder.h"
#include "passes/reshard_plan.h"
#include "tests/engine/distributed_test_util.h"
#include "tests/engine/rank_threads.h"

namespace pdist::engine {
namespace {

using ir::Placement;

const ir::Shape kShape = {4, 8};

exec::Tensor Whole() {
  std::vector<double> values;
  for (int64_t i = 0; i < 32; ++i) values.push_back(0.25 * static_cast<double>((i * 5) % 17) - 1.0);
  return exec::TensorFromDoubles({kShape, ir::DataType::kFloat64}, values);
}

// x on `from` → reshard → y on `to`; every rank of `to` must hold its slice of x.
void CheckMove(const ir::DistAttr& from, const ir::DistAttr& to, int world) {
  ir::Program program;
  ir::Builder b(&program);
  ir::Value* x = b.Data("x", {kShape, ir::DataType::kFloat64});
  x->set_dist_attr(from);
  ir::Value* y = *b.Op1("reshard", {x});
  y->set_dist_attr(to);
  ir::Value* out = *b.Op1("scale", {y}, {{"scale", 1.0}});
  out->set_dist_attr(to);
  const exec::Tensor whole = Whole();
  const std::string what = absl::StrCat(from.ToString(), " → ", to.ToString(), ": ",
                                        passes::PlanReshard(from, to, kShape)->ToString());
  auto results = testing::RunPartitioned(
      program, world,
      [&](int64_t r) {
        if (!from.mesh.Contains(r)) return exec::Feeds{};
        return exec::Feeds{{"x", *SliceForRank(whole, from, r)}};
      },
      out->id());
  for (int r = 0; r < world; ++r) {
    ASSERT_TRUE(results[static_cast<size_t>(r)].ok()) << what << ", rank " << r << ": " << results[static_cast<size_t>(r)].status();
    if (!to.mesh.Contains(r)) continue;
    EXPECT_EQ(exec::TensorToDoubles(*results[static_cast<size_t>(r)]), exec::TensorToDoubles(*SliceForRank(whole, to, r)))
        << what << ", rank " << r;
  }
}

TEST(MeshToMeshTest, EveryPlacementPairBetweenTwoStages) {
  const ir::ProcessMesh a = *ir::ProcessMesh::Create({2}, {0, 1}, {"dp"});
  const ir::ProcessMesh b = *ir::ProcessMesh::Create({2}, {2, 3}, {"dp"});
  const ir::ProcessMesh single = *ir::ProcessMesh::Create({1}, {3}, {"dp"});
  const std::vector<Placement> options = {Placement::Replicate(), Placement::Shard(0), Placement::Shard(1)};
  int checked = 0;
  for (const Placement& p : options) {
    for (const Placement& q : options) {
      CheckMove(*ir::DistAttr::FromPlacements(a, 2, {p}), *ir::DistAttr::FromPlacements(b, 2, {q}), 4);
      ++checked;
    }
    // Different mesh shapes: replicate on the source, receive whole, slice on the target.
    CheckMove(*ir::DistAttr::FromPlacements(a, 2, {p}), *ir::DistAttr::FromPlacements(single, 2, {Placement::Replicate()}), 4);
    CheckMove(*ir::DistAttr::FromPlacements(single, 2, {Placement::Replicate()}), *ir::DistAttr::FromPlacements(a, 2, {p}), 4);
    checked += 2;
  }
  EXPECT_EQ(checked, 15);
}

TEST(MeshToMeshTest, PlanPrintsTheMove) {
  const ir::ProcessMesh a = *ir::ProcessMesh::Create({2}, {0, 1}, {"dp"});
  const ir::ProcessMesh b = *ir::ProcessMesh::Create({2}, {2, 3}, {"dp"});
  auto plan = passes::PlanReshard(*ir::DistAttr::FromPlacements(a, 2, {Placement::Shard(0)}),
                                  *ir::DistAttr::FromPlacements(b, 2, {Placement::Shard(1)}), kShape);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->ToString(), "S(0) → S(1) → S(1)@[2,3]");
}

// Two stages, each data parallel over 2 ranks: stage 0 = ranks {0,1} computes h = x·w0, stage 1 =
// ranks {2,3} gets h by send/recv and computes the loss from h·w1. The backward sends the
// gradient of h back. 10 AdamW steps equal one rank's (f64, 1e-10).
ir::Program TwoStageMlp(bool distributed) {
  ir::Program p;
  ir::Builder b(&p);
  const ir::ProcessMesh s0 = *ir::ProcessMesh::Create({2}, {0, 1}, {"dp"});
  const ir::ProcessMesh s1 = *ir::ProcessMesh::Create({2}, {2, 3}, {"dp"});
  const ir::DataType f64 = ir::DataType::kFloat64;
  ir::Value* x = b.Data("tokens", {{8, 16}, f64});
  ir::Value* w0 = b.Parameter("w0", {{16, 32}, f64}, "normal(0.2)");
  ir::Value* w1 = b.Parameter("w1", {{32, 4}, f64}, "normal(0.2)");
  if (distributed) {
    EXPECT_TRUE(b.ShardTensor(x, s0, {Placement::Shard(0)}).ok());
    EXPECT_TRUE(b.ShardTensor(w0, s0, {Placement::Replicate()}).ok());
    EXPECT_TRUE(b.ShardTensor(w1, s1, {Placement::Replicate()}).ok());
  }
  ir::Value* h = *b.Op1("tanh", {*b.Op1("matmul", {x, w0})});
  if (distributed) {
    h = *b.Op1("reshard", {h});
    h->set_dist_attr(*ir::DistAttr::FromPlacements(s1, 2, {Placement::Shard(0)}));
  }
  ir::Value* y = *b.Op1("matmul", {h, w1});
  ir::Value* loss = *b.Op1("mean", {*b.Op1("multiply", {y, y})});
  p.set_loss(loss);
  return p;
}

TEST(MeshToMeshTest, TwoStagesWithDataParallelismTrainLikeOneRank) {
  EngineOptions o;
  o.lr.base = 1e-2;
  o.seed = 3;
  auto run = [&](bool distributed) {
    int64_t world = 0;
    testing::RunOutcome out = testing::TrainOnSineBatches(TwoStageMlp(distributed), o, 10, &world);
    EXPECT_EQ(world, distributed ? 4 : 1);
    return out;
  };
  const testing::RunOutcome single = run(false);
  const testing::RunOutcome staged = run(true);
  testing::ExpectSameTraining(staged, single, TwoStageMlp(false), 1e-10);
}

}  // namespace
}  // namespace pdist::engine
