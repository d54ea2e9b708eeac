// SPMD rules of softmax, log_softmax, layer_norm, rms_norm and their gradients: hand-worked cases.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/spmd/spmd_test_util.h"

namespace pdist::nn_spmd_test {
namespace {

using ::testing::HasSubstr;

const Shape kX = {8, 16, 32};

// --- softmax / log_softmax ---------------------------------------------------------------

TEST(SoftmaxSpmd, PaddleExampleAxisReplicated) {
  // Paddle a.8: x[1,-1,0] with axis = -1 → [1,-1,-1].
  EXPECT_EQ(Print(Forward("softmax", {S(kX, {1, -1, 0})}, {2, 2})), "[1,-1,-1] -> [1,-1,-1]");
  EXPECT_EQ(Print(Forward("log_softmax", {S(kX, {1, -1, 0})}, {2, 2})), "[1,-1,-1] -> [1,-1,-1]");
}

TEST(SoftmaxSpmd, OtherAxisPassesThrough) {
  EXPECT_EQ(Print(Forward("softmax", {S(kX, {1, 0, -1})}, {2, 2}, {{"axis", int64_t{1}}})),
            "[1,-1,-1] -> [1,-1,-1]");
  EXPECT_EQ(Print(Forward("softmax", {S(kX, {-1, -1, 0})}, {4}, {{"axis", int64_t{0}}})),
            "[-1,-1,0] -> [-1,-1,0]");
}

TEST(SoftmaxSpmd, ReplicatedStaysReplicated) {
  EXPECT_EQ(Print(Forward("softmax", {S(kX, {-1, -1, -1})}, {4})), "[-1,-1,-1] -> [-1,-1,-1]");
}

TEST(SoftmaxSpmd, PartialInputIsCleared) {
  // exp is not linear: the Partial sum must be reduced before the op.
  EXPECT_EQ(Print(Forward("softmax", {S(kX, {0, -1, -1}, Sum(1))}, {2, 2})), "[0,-1,-1] -> [0,-1,-1]");
}

TEST(SoftmaxSpmd, SizeOneAxisIsNeverSharded) {
  EXPECT_EQ(Print(Forward("softmax", {S({8, 1, 32}, {-1, 0, -1})}, {2})), "[-1,-1,-1] -> [-1,-1,-1]");
}

TEST(SoftmaxSpmd, ReverseFromOutput) {
  const auto r = Reverse("softmax", {S(kX, {-1, -1, -1})}, {S(kX, {1, -1, 0})}, {2, 2});
  EXPECT_EQ(Print(r), "[1,-1,-1] -> [1,-1,-1]");
}

TEST(SoftmaxSpmd, GradMergesOutAndOutGrad) {
  EXPECT_EQ(Print(Forward("softmax_grad", {S(kX, {0, -1, -1}), S(kX, {-1, 1, -1})}, {2, 2})),
            "[0,1,-1], [0,1,-1] -> [0,1,-1]");
  // Conflict: mesh dim 0 on a (out) and on b (out_grad): the first seen keeps it.
  EXPECT_EQ(Print(Forward("log_softmax_grad", {S(kX, {0, -1, -1}), S(kX, {-1, 0, -1})}, {2})),
            "[0,-1,-1], [0,-1,-1] -> [0,-1,-1]");
  // x_grad is linear in out_grad: its Partial passes; a Partial out is cleared.
  EXPECT_EQ(Print(Forward("softmax_grad", {S(kX, {0, -1, -1}), S(kX, {0, -1, -1}, Sum(1))}, {2, 2})),
            "[0,-1,-1], [0,-1,-1] {1: sum} -> [0,-1,-1] {1: sum}");
  EXPECT_EQ(Print(Forward("softmax_grad", {S(kX, {0, -1, -1}, Sum(1)), S(kX, {0, -1, -1})}, {2, 2})),
            "[0,-1,-1], [0,-1,-1] -> [0,-1,-1]");
  EXPECT_EQ(Print(Reverse("softmax_grad", {S(kX, {-1, -1, -1}), S(kX, {-1, -1, -1})}, {S(kX, {0, -1, 1})}, {2, 2})),
            "[0,-1,-1], [0,-1,-1] -> [0,-1,-1]");
}

TEST(SoftmaxSpmd, Describe) {
  EXPECT_EQ(Describe("softmax", {kX}), "abc->abc  c→Replicate");
  EXPECT_EQ(Describe("log_softmax", {kX}, {{"axis", int64_t{1}}}), "abc->abc  b→Replicate");
  EXPECT_EQ(Describe("softmax_grad", {kX, kX}), "abc,abc->abc  c→Replicate  pass P: out_grad");
  EXPECT_EQ(Describe("softmax", {{8, 1, 32}}, {{"axis", int64_t{0}}}), "a1c->a1c  a→Replicate");
}

TEST(SoftmaxSpmd, Errors) {
  std::string e = ErrorOf(Forward("softmax", {S(kX, {-1, -1, -1})}, {2}, {{"axis", int64_t{3}}}));
  EXPECT_THAT(e, HasSubstr("softmax"));
  EXPECT_THAT(e, HasSubstr("axis 3"));
  e = ErrorOf(Forward("softmax", {S(kX, {0, -1})}, {2}));
  EXPECT_THAT(e, HasSubstr("softmax"));
  EXPECT_THAT(e, HasSubstr("[0,-1]"));
  e = ErrorOf(Forward("log_softmax", {S(kX, {0, 0, -1})}, {2, 2}));
  EXPECT_THAT(e, HasSubstr("log_softmax"));
  EXPECT_THAT(e, HasSubstr("[0,0,-1]"));
  e = ErrorOf(Forward("softmax", {S(kX, {2, -1, -1})}, {2, 2}));
  EXPECT_THAT(e, HasSubstr("[2,-1,-1]"));
}

// --- layer_norm ----------------------------------------------------------------------------

const Shape kH = {32};  // scale / bias for begin_norm_axis = 2
const ir::AttributeMap kBegin2 = {{"begin_norm_axis", int64_t{2}}};

TEST(LayerNormSpmd, PaddleExampleBeginAxisOne) {
  // Paddle a.9: begin_norm_axis = 1, x [0,-1,-1] → mean [0]; scale and bias [-1].
  const Shape cols = {16 * 32};
  EXPECT_EQ(Print(Forward("layer_norm", {S(kX, {0, -1, -1}), S(cols, {-1}), S(cols, {-1})}, {2, 2})),
            "[0,-1,-1], [-1], [-1] -> [0,-1,-1], [0], [0]");
}

TEST(LayerNormSpmd, NormalisedAxesReplicated) {
  EXPECT_EQ(Print(Forward("layer_norm", {S(kX, {-1, -1, 0}), S(kH, {-1}), S(kH, {-1})}, {2}, kBegin2)),
            "[-1,-1,-1], [-1], [-1] -> [-1,-1,-1], [-1,-1], [-1,-1]");
  // A sharded scale is gathered: every rank scales all columns.
  EXPECT_EQ(Print(Forward("layer_norm", {S(kX, {1, -1, -1}), S(kH, {0}), S(kH, {-1})}, {2, 2}, kBegin2)),
            "[1,-1,-1], [-1], [-1] -> [1,-1,-1], [1,-1], [1,-1]");
}

TEST(LayerNormSpmd, EveryLeadingAxisKeepsItsSharding) {
  // Sequence parallelism with data parallelism: the batch over mesh dim 0, the sequence over
  // mesh dim 1; the statistics [8,16] carry both.
  EXPECT_EQ(Print(Forward("layer_norm", {S(kX, {0, 1, -1}), S(kH, {-1}), S(kH, {-1})}, {2, 2}, kBegin2)),
            "[0,1,-1], [-1], [-1] -> [0,1,-1], [0,1], [0,1]");
  // A leading size-1 axis is never sharded.
  EXPECT_EQ(Print(Forward("layer_norm", {S({1, 16, 32}, {-1, 1, -1}), S(kH, {-1}), S(kH, {-1})}, {2, 2}, kBegin2)),
            "[-1,1,-1], [-1], [-1] -> [-1,1,-1], [-1,1], [-1,1]");
}

TEST(LayerNormSpmd, PartialAndAbsentInputs) {
  EXPECT_EQ(Print(Forward("layer_norm", {S(kX, {0, -1, -1}, Sum(1))}, {2, 2}, kBegin2)),
            "[0,-1,-1] -> [0,-1,-1], [0,-1], [0,-1]");
  EXPECT_EQ(Print(Forward("layer_norm", {S(kX, {0, -1, -1}), Absent(), Absent()}, {2}, kBegin2)),
            "[0,-1,-1], _, _ -> [0,-1,-1], [0,-1], [0,-1]");
}

TEST(LayerNormSpmd, OutputShapes) {
  const auto r = Forward("layer_norm", {S(kX, {0, -1, -1}), S(kH, {-1}), S(kH, {-1})}, {2}, kBegin2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outputs[0].shape, kX);
  EXPECT_EQ(r->outputs[1].shape, (Shape{8, 16}));
  EXPECT_EQ(r->outputs[2].shape, (Shape{8, 16}));
}

TEST(LayerNormSpmd, Reverse) {
  const std::vector<TensorDistSpec> in = {S(kX, {-1, -1, -1}), S({512}, {-1}), S({512}, {-1})};
  // begin_norm_axis = 1, mean [0] → x [0,-1,-1].
  EXPECT_EQ(Print(Reverse("layer_norm", in, {S(kX, {-1, -1, -1}), S({8}, {0}), S({8}, {-1})}, {2, 2})),
            "[0,-1,-1], [-1], [-1] -> [0,-1,-1], [0], [0]");
  // Paddle throws for out[1,..] against mean[0]; pdist's merge keeps the first seen (out).
  EXPECT_EQ(Print(Reverse("layer_norm", in, {S(kX, {1, -1, -1}), S({8}, {0}), S({8}, {0})}, {2, 2})),
            "[1,-1,-1], [-1], [-1] -> [1,-1,-1], [1], [1]");
  // Paddle a.9's example: out[-1,-1,-1], mean[0,-1], variance[-1,1] → x[0,1,-1].
  const std::vector<TensorDistSpec> in2 = {S(kX, {-1, -1, -1}), S(kH, {-1}), S(kH, {-1})};
  EXPECT_EQ(Print(Reverse("layer_norm", in2, {S(kX, {-1, -1, -1}), S({8, 16}, {0, -1}), S({8, 16}, {-1, 1})}, {2, 2},
                          kBegin2)),
            "[0,1,-1], [-1], [-1] -> [0,1,-1], [0,1], [0,1]");
}

TEST(LayerNormSpmd, GradScaleAndBiasArePartialOverTheRows) {
  const std::vector<TensorDistSpec> in = {S(kX, {0, -1, -1}), S(kH, {-1}),      S(kH, {-1}),
                                          S({8, 16}, {0, -1}), S({8, 16}, {0, -1}), S(kX, {0, -1, -1})};
  EXPECT_EQ(Print(Forward("layer_norm_grad", in, {2, 2}, kBegin2)),
            "[0,-1,-1], [-1], [-1], [0,-1], [0,-1], [0,-1,-1] -> [0,-1,-1], [-1] {0: sum}, [-1] {0: sum}");
  // Every gradient is linear in out_grad: its Partial passes to all three.
  std::vector<TensorDistSpec> partial = in;
  partial[5].partial = Sum(1);
  EXPECT_EQ(Print(Forward("layer_norm_grad", partial, {2, 2}, kBegin2)),
            "[0,-1,-1], [-1], [-1], [0,-1], [0,-1], [0,-1,-1] {1: sum} -> "
            "[0,-1,-1] {1: sum}, [-1] {0: sum, 1: sum}, [-1] {0: sum, 1: sum}");
  // A Partial x is not linear: cleared.
  partial[0].partial = Sum(1);
  partial[5].partial = {};
  EXPECT_EQ(Print(Forward("layer_norm_grad", partial, {2, 2}, kBegin2)),
            "[0,-1,-1], [-1], [-1], [0,-1], [0,-1], [0,-1,-1] -> [0,-1,-1], [-1] {0: sum}, [-1] {0: sum}");
  // Sequence parallel: batch and sequence sharded, the parameter gradients Partial over both.
  const std::vector<TensorDistSpec> sp = {S(kX, {0, 1, -1}), S(kH, {-1}),     S(kH, {-1}),
                                          S({8, 16}, {0, 1}), S({8, 16}, {0, 1}), S(kX, {0, 1, -1})};
  EXPECT_EQ(Print(Forward("layer_norm_grad", sp, {2, 2}, kBegin2)),
            "[0,1,-1], [-1], [-1], [0,1], [0,1], [0,1,-1] -> [0,1,-1], [-1] {0: sum, 1: sum}, [-1] {0: sum, 1: sum}");
}

TEST(LayerNormSpmd, GradAlignsConflicts) {
  // x on mesh dim 0, out_grad on mesh dim 1 for the same axis: AlignDimsSharding picks a → 0
  // (mesh dim 0 comes first) and a cannot take mesh dim 1 as well.
  const std::vector<TensorDistSpec> in = {S(kX, {0, -1, -1}),   Absent(), Absent(),
                                          S({8, 16}, {-1, -1}), S({8, 16}, {-1, -1}), S(kX, {1, -1, -1})};
  EXPECT_EQ(Print(Forward("layer_norm_grad", in, {2, 2}, kBegin2)),
            "[0,-1,-1], _, _, [0,-1], [0,-1], [0,-1,-1] -> [0,-1,-1], [-1], [-1]");
}

TEST(LayerNormSpmd, GradReverse) {
  const std::vector<TensorDistSpec> in = {S(kX, {-1, -1, -1}),  S(kH, {-1}),          S(kH, {-1}),
                                          S({8, 16}, {-1, -1}), S({8, 16}, {-1, -1}), S(kX, {-1, -1, -1})};
  const std::vector<TensorDistSpec> out = {S(kX, {1, -1, -1}), S(kH, {-1}), S(kH, {-1})};
  EXPECT_EQ(Print(Reverse("layer_norm_grad", in, out, {2, 2}, kBegin2)),
            "[1,-1,-1], [-1], [-1], [1,-1], [1,-1], [1,-1,-1] -> [1,-1,-1], [-1], [-1]");
}

TEST(LayerNormSpmd, Describe) {
  EXPECT_EQ(Describe("layer_norm", {kX, kH, kH}, kBegin2), "abc,c,c->abc,ab,ab  c→Replicate");
  EXPECT_EQ(Describe("layer_norm", {kX, {512}, {512}}), "abc,1,1->abc,a,a  bc→Replicate");
  EXPECT_EQ(Describe("layer_norm", {{1, 16, 32}, kH, {0}}, kBegin2), "1bc,c,_->1bc,1b,1b  c→Replicate");
  EXPECT_EQ(Describe("layer_norm_grad", {kX, kH, kH, {8, 16}, {8, 16}, kX}, kBegin2),
            "abc,c,c,ab,ab,abc->abc,c,c  scale_grad: ab→Partial  bias_grad: ab→Partial  c→Replicate  pass P: out_grad");
}

TEST(LayerNormSpmd, Errors) {
  std::string e = ErrorOf(Forward("layer_norm", {S(kX, {-1, -1, -1})}, {2}, {{"begin_norm_axis", int64_t{3}}}));
  EXPECT_THAT(e, HasSubstr("layer_norm"));
  EXPECT_THAT(e, HasSubstr("begin_norm_axis 3"));
  e = ErrorOf(Forward("layer_norm", {S(kX, {-1, -1, -1}), S(kH, {-1, -1})}, {2}, kBegin2));
  EXPECT_THAT(e, HasSubstr("layer_norm"));
  EXPECT_THAT(e, HasSubstr("[-1,-1]"));
}

// --- rms_norm ------------------------------------------------------------------------------

TEST(RmsNormSpmd, ForwardReverseAndGrad) {
  // Default begin_norm_axis = -1: c replicated, a and b keep their sharding; invvar is [8,16].
  EXPECT_EQ(Print(Forward("rms_norm", {S(kX, {0, -1, 1}), S(kH, {-1})}, {2, 2})),
            "[0,-1,-1], [-1] -> [0,-1,-1], [0,-1]");
  EXPECT_EQ(Print(Forward("rms_norm", {S(kX, {-1, 0, -1}), S(kH, {-1})}, {2})), "[-1,0,-1], [-1] -> [-1,0,-1], [-1,0]");
  EXPECT_EQ(Print(Reverse("rms_norm", {S(kX, {-1, -1, -1}), S(kH, {-1})}, {S(kX, {-1, -1, -1}), S({8, 16}, {1, -1})},
                          {2, 2})),
            "[1,-1,-1], [-1] -> [1,-1,-1], [1,-1]");
  const std::vector<TensorDistSpec> grad_in = {S(kX, {0, -1, -1}), S(kH, {-1}), S({8, 16}, {0, -1}), S(kX, {0, -1, -1})};
  EXPECT_EQ(Print(Forward("rms_norm_grad", grad_in, {2})),
            "[0,-1,-1], [-1], [0,-1], [0,-1,-1] -> [0,-1,-1], [-1] {0: sum}");
}

TEST(RmsNormSpmd, Describe) {
  EXPECT_EQ(Describe("rms_norm", {kX, kH}), "abc,c->abc,ab  c→Replicate");
  EXPECT_EQ(Describe("rms_norm_grad", {kX, kH, {8, 16}, kX}),
            "abc,c,ab,abc->abc,c  scale_grad: ab→Partial  c→Replicate  pass P: out_grad");
}

}  // namespace
}  // namespace pdist::nn_spmd_test
