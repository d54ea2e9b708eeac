// Profiles of GPT segments against closed forms: the layer's parameters and FLOPs, its share of
// a tensor-parallel group, the boundary it sends, the activations it keeps.
#include "planner/profile.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "ir/builder.h"
#include "ir/models/gpt.h"
#include "passes/distributed_programs.h"
#include "planner/estimate.h"
#include "planner/segment_cost.h"

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
  const SegmentCost &embedding = (*p)->kinds[kEmbeddingKind], &layer = (*p)->kinds[kLayerKind],
                    &head = (*p)->kinds[kHeadKind];
  const double h = kHidden, s = kSeq, b = 2, V = kVocab;
  // 12h² + 13h per layer (qkv, proj, up, down with biases; two LayerNorms).
  EXPECT_DOUBLE_EQ(layer.param_elements, 12 * h * h + 13 * h);
  EXPECT_DOUBLE_EQ(embedding.param_elements, V * h + s * h);
  EXPECT_DOUBLE_EQ(head.param_elements, h * V + 2 * h);
  // f32: 4 bytes a parameter, the gradient the same, AdamW two moments.
  EXPECT_DOUBLE_EQ(layer.param_bytes, 4 * layer.param_elements);
  EXPECT_DOUBLE_EQ(layer.grad_bytes, layer.param_bytes);
  EXPECT_GE(layer.optimizer_state_bytes, 2 * layer.param_bytes);
  // Model FLOPs of a layer, forward + backward = 3 × forward: 3 · (24·b·s·h² + 4·b·s²·h) for
  // the products, a few per cent more for the elementwise ops.
  const double matmul = 3 * (24 * b * s * h * h + 4 * b * s * s * h);
  EXPECT_GE(layer.model_flops, matmul);
  EXPECT_LE(layer.model_flops, 1.1 * matmul);
  // The kernels do less: causal attention skips half of q·kᵀ and p·v (and recomputes in the
  // backward): 12·b·s²·h of model FLOPs are 7·b·s²·h of kernel FLOPs.
  EXPECT_DOUBLE_EQ(layer.model_flops - layer.flops, 5 * b * s * s * h);
  // The residual stream crosses each cut: b·s·h floats.
  EXPECT_DOUBLE_EQ(layer.boundary_bytes, 4 * b * s * h);
  // Selective recompute drops some of what a layer saves, not all (the matmuls' results stay).
  const SegmentCost& selective =
      (*profiler.Get({.mp = 1, .sp = false, .micro_batch = 2, .recompute = Recompute::kSelective}))->kinds[kLayerKind];
  EXPECT_GT(selective.saved_bytes, 0);
  EXPECT_GT(layer.saved_bytes, selective.saved_bytes);
  for (double t : layer.seconds) EXPECT_GE(t, 0);
  EXPECT_GT(layer.Seconds(ir::OpRole::kForward), 0);
  EXPECT_GT(layer.Seconds(ir::OpRole::kBackwardWeight), 0);
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
  EXPECT_DOUBLE_EQ((*two)->kinds[kLayerKind].param_elements, 6 * h * h + (3 * h + 4 * h) / 2 + 2 * h + 4 * h);
  EXPECT_GT((*two)->kinds[kLayerKind].MpCommSeconds(ir::OpRole::kForward), 0);
  EXPECT_EQ(one->kinds[kLayerKind].MpCommSeconds(ir::OpRole::kForward), 0);
  absl::StatusOr<const ModelProfile*> sp = profiler.Get({.mp = 2, .sp = true, .micro_batch = 2});
  ASSERT_TRUE(sp.ok()) << sp.status();
  EXPECT_DOUBLE_EQ((*sp)->kinds[kLayerKind].boundary_bytes, one->kinds[kLayerKind].boundary_bytes / 2);
  EXPECT_LT((*sp)->kinds[kLayerKind].saved_bytes, (*two)->kinds[kLayerKind].saved_bytes);
  EXPECT_EQ(profiler.programs_profiled(), 3);
  // Each kind is one stage's local program: nothing may come out negative.
  for (const ModelProfile* p : {one, *two, *sp}) {
    ASSERT_EQ(p->kinds.size(), 3u);
    for (const SegmentCost* s : {&p->kinds[kEmbeddingKind], &p->kinds[kLayerKind], &p->kinds[kHeadKind]}) {
      for (size_t role = 0; role < 4; ++role) {
        EXPECT_GE(s->seconds[role], 0) << role;
        EXPECT_GE(s->mp_comm_seconds[role], -1e-18) << role;
      }
      EXPECT_GE(s->saved_bytes, 0);
    }
  }
}

// The whole model against the standard closed forms for GPT (Narayanan et al., SC'21), on sizes
// from tiny to GPT-3 175B: parameters 12·l·h²·(1 + 13/(12h) + (V+s)/(12·l·h)) with a tied head
// (plus the final LayerNorm's 2h, which the form leaves out), and model FLOPs per step
// 72·B·l·s·h²·(1 + s/(6h) + V/(12·l·h)), which counts the matmuls only: the profile's count may
// exceed it by the elementwise ops, a share that shrinks as h grows.
TEST(ProfileTest, WholeModelMatchesTheClosedFormsOnSeveralSizes) {
  struct Size {
    double l, h, heads, V, s, B, flops_slack;
  };
  for (const Size& z : {Size{4, 64, 4, 128, 16, 8, 0.06}, Size{24, 1024, 16, 51200, 1024, 512, 0.01},
                        Size{96, 12288, 96, 51200, 2048, 1536, 0.002}}) {
    const std::string spec = absl::StrCat("gpt:layers=", z.l, ",hidden=", z.h, ",heads=", z.heads, ",vocab=", z.V,
                                          ",seq=", z.s, ",tied=1");
    const PlannedModel model = *ModelFromSpec(spec, static_cast<int64_t>(z.B));
    Profiler profiler(model, *strategy::ClusterPreset("dgx-a100", 8));
    absl::StatusOr<const ModelProfile*> p = profiler.Get({.mp = 1, .sp = false, .micro_batch = 1});
    ASSERT_TRUE(p.ok()) << spec << ": " << p.status();
    const double params = (*p)->kinds[kEmbeddingKind].param_elements + z.l * (*p)->kinds[kLayerKind].param_elements +
                          (*p)->kinds[kHeadKind].param_elements;
    const double closed_params = 12 * z.l * z.h * z.h * (1 + 13 / (12 * z.h) + (z.V + z.s) / (12 * z.l * z.h));
    EXPECT_DOUBLE_EQ(params, closed_params + 2 * z.h) << spec;
    const double flops = *ModelFlopsPerStep(model, profiler);
    const double closed_flops = 72 * z.B * z.l * z.s * z.h * z.h * (1 + z.s / (6 * z.h) + z.V / (12 * z.l * z.h));
    EXPECT_GE(flops, closed_flops) << spec;
    EXPECT_LE(flops, closed_flops * (1 + z.flops_slack)) << spec << ": " << flops / closed_flops - 1;
  }
}

// A tied head's stage holds the table's copy (the prologue's receive) and the sum of its share
// of the table's gradient, each whole for the whole step; an untied head holds neither (its own
// weight is a parameter, counted as one).
TEST(ProfileTest, ATiedHeadHoldsTheTablesCopyAndItsGradientShareAllStep) {
  for (int tied : {1, 0}) {
    const PlannedModel model =
        *ModelFromSpec(absl::StrCat("gpt:layers=2,hidden=64,heads=4,vocab=128,seq=16,tied=", tied), 8);
    Profiler profiler(model, *strategy::ClusterPreset("dgx-a100", 8));
    absl::StatusOr<const ModelProfile*> p = profiler.Get({.mp = 1, .sp = false, .micro_batch = 1});
    ASSERT_TRUE(p.ok()) << p.status();
    const SegmentCost& head = (*p)->kinds[kHeadKind];
    const double table = 128 * 64 * 4;  // f32
    EXPECT_DOUBLE_EQ(head.step_value_bytes, tied ? table : 0) << "tied=" << tied;
    EXPECT_DOUBLE_EQ(head.step_sum_bytes, tied ? table : 0) << "tied=" << tied;
    EXPECT_DOUBLE_EQ((*p)->kinds[kEmbeddingKind].step_value_bytes, 0);
  }
}

// The backward walk counts an add gradient that is the output gradient as that storage
// (ir::OpDef::aliases_if_same_type): l = mean(z), z = a ± b of two [4,8] matmuls (128 bytes
// each), where add's two operand gradients are both the output gradient g and subtract's second
// is −g, a tensor of its own. Beyond what the backward starts with (not z: mean_grad reads only
// its type), add peaks at g and the first matmul's input gradient (2 × 128 bytes), subtract
// with −g beside them (3 × 128); without the alias add would count as subtract does.
TEST(SegmentCostTest, AnAddGradientThatIsTheOutputGradientIsNotCountedAgain) {
  auto excess = [](const char* combine) -> double {
    ir::Program p;
    ir::Builder b(&p);
    ir::Value* x = b.Data("x", {{4, 8}, ir::DataType::kFloat32});
    ir::Value* w1 = b.Parameter("w1", {{8, 8}, ir::DataType::kFloat32}, "normal(0.02)");
    ir::Value* w2 = b.Parameter("w2", {{8, 8}, ir::DataType::kFloat32}, "normal(0.02)");
    absl::StatusOr<ir::Value*> z = b.Op1(combine, {*b.Op1("matmul", {x, w1}), *b.Op1("matmul", {x, w2})});
    EXPECT_TRUE(z.ok()) << z.status();
    p.set_loss(*b.Op1("mean", {*z}));
    passes::PassContext context;
    EXPECT_TRUE(passes::RunPipeline(passes::SingleRankPipeline({}), p, context, "training program").ok());
    absl::StatusOr<SegmentCost> cost = PriceLocalProgram(p, FourDevices());
    EXPECT_TRUE(cost.ok()) << cost.status();
    return cost.ok() ? cost->backward_excess_bytes : -1;
  };
  EXPECT_DOUBLE_EQ(excess("add"), 2 * 128);
  EXPECT_DOUBLE_EQ(excess("subtract"), 3 * 128);
}

}  // namespace
}  // namespace pdist::planner
