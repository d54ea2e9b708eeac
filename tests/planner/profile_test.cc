// Profiles of GPT segments against closed forms: the layer's parameters and FLOPs, its share of
// a tensor-parallel group, the boundary it sends, the activations it keeps.
#include "planner/profile.h"

#include <gtest/gtest.h>

#include "ir/models/gpt.h"

namespace pdist::planner {
namespace {

constexpr int64_t kHidden = 64, kHeads = 4, kVocab = 128, kSeq = 16, kLayers = 6;

PlannedModel SmallGpt(int64_t global_batch) {
  return *ModelFromSpec("gpt:layers=6,hidden=64,heads=4,vocab=128,seq=16", global_batch);
}

strategy::Cluster FourDevices() { return *strategy::ClusterPreset("dgx-a100", 4); }

TEST(ProfileTest, LayerParametersAndFlopsMatchTheClosedForms) {
  const PlannedModel model = SmallGpt(8);
  const strategy::Cluster cluster = FourDevices();
  Profiler profiler(model, cluster);
  absl::StatusOr<const ModelProfile*> p = profiler.Get({.mp = 1, .sp = false, .micro_batch = 2});
  ASSERT_TRUE(p.ok()) << p.status();
  const double h = kHidden, s = kSeq, b = 2, V = kVocab;
  // 12h² + 13h per layer (qkv, proj, up, down with biases; two LayerNorms).
  EXPECT_DOUBLE_EQ((*p)->layer.param_elements, 12 * h * h + 13 * h);
  EXPECT_DOUBLE_EQ((*p)->embedding.param_elements, V * h + s * h);
  EXPECT_DOUBLE_EQ((*p)->head.param_elements, h * V + 2 * h);
  // f32: 4 bytes a parameter, the gradient the same, AdamW two moments.
  EXPECT_DOUBLE_EQ((*p)->layer.param_bytes, 4 * (*p)->layer.param_elements);
  EXPECT_DOUBLE_EQ((*p)->layer.grad_bytes, (*p)->layer.param_bytes);
  EXPECT_GE((*p)->layer.optimizer_state_bytes, 2 * (*p)->layer.param_bytes);
  // Matmul FLOPs of a layer, forward + backward = 3 × forward: 3 · (24·b·s·h² + 4·b·s²·h).
  const double matmul = 3 * (24 * b * s * h * h + 4 * b * s * s * h);
  EXPECT_GE((*p)->layer.flops, matmul);
  EXPECT_LE((*p)->layer.flops, 1.1 * matmul);
  // The residual stream crosses each cut: b·s·h floats.
  EXPECT_DOUBLE_EQ((*p)->layer.boundary_bytes, 4 * b * s * h);
  EXPECT_GT((*p)->layer.recomputable_bytes, 0);
  EXPECT_GT((*p)->layer.saved_bytes, (*p)->layer.recomputable_bytes);
  for (double t : (*p)->layer.seconds) EXPECT_GE(t, 0);
  EXPECT_GT((*p)->layer.Seconds(ir::OpRole::kForward), 0);
  EXPECT_GT((*p)->layer.Seconds(ir::OpRole::kBackwardWeight), 0);
}

TEST(ProfileTest, TensorParallelismSplitsTheLayer) {
  const PlannedModel model = SmallGpt(8);
  const strategy::Cluster cluster = FourDevices();
  Profiler profiler(model, cluster);
  const ModelProfile* one = *profiler.Get({.mp = 1, .sp = false, .micro_batch = 2});
  absl::StatusOr<const ModelProfile*> two = profiler.Get({.mp = 2, .sp = false, .micro_batch = 2});
  ASSERT_TRUE(two.ok()) << two.status();
  const double h = kHidden;
  // Matrices and the column-parallel biases (qkv 3h, up 4h) halve; the row-parallel biases
  // (proj, down) and the LayerNorms stay whole.
  EXPECT_DOUBLE_EQ((*two)->layer.param_elements, 6 * h * h + (3 * h + 4 * h) / 2 + 2 * h + 4 * h);
  EXPECT_GT((*two)->layer.MpCommSeconds(ir::OpRole::kForward), 0);
  EXPECT_EQ(one->layer.MpCommSeconds(ir::OpRole::kForward), 0);
  absl::StatusOr<const ModelProfile*> sp = profiler.Get({.mp = 2, .sp = true, .micro_batch = 2});
  ASSERT_TRUE(sp.ok()) << sp.status();
  EXPECT_DOUBLE_EQ((*sp)->layer.boundary_bytes, one->layer.boundary_bytes / 2);
  EXPECT_LT((*sp)->layer.saved_bytes, (*two)->layer.saved_bytes);
  EXPECT_EQ(profiler.programs_profiled(), 3);
  // Segments are differences of stage programs; none may come out negative.
  for (const ModelProfile* p : {one, *two, *sp}) {
    for (const SegmentCost* s : {&p->embedding, &p->layer, &p->head}) {
      for (size_t role = 0; role < 4; ++role) {
        EXPECT_GE(s->seconds[role], 0) << role;
        EXPECT_GE(s->mp_comm_seconds[role], -1e-18) << role;
      }
      EXPECT_GE(s->saved_bytes, 0);
    }
  }
}

}  // namespace
}  // namespace pdist::planner
