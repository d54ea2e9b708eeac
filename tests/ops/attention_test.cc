// fused_rope and flash_attn: rotations of known vectors, attention against a naive reference,
// errors, gradients.
#include <cmath>
#include <limits>

#include "ir/op_def.h"
#include "tests/ops/nn_test_util.h"

namespace pdist::nn_test {
namespace {

using pdist::testing::GradInput;

// q [1, 2, 1, 4]: position 0 is left unchanged, position 1 = (1, 2, 3, 4) is rotated by
// theta = 1 for pair 0 and 10000^(-1/2) = 0.01 for pair 1.
const Tensor kQ = F64({1, 2, 1, 4}, {5, 6, 7, 8, 1, 2, 3, 4});

TEST(FusedRopeTest, AdjacentPairs) {
  const std::vector<Tensor> out = RunOk("fused_rope", {kQ});
  ASSERT_EQ(out.size(), 3u);
  const double c1 = std::cos(1.0), s1 = std::sin(1.0), c2 = std::cos(0.01), s2 = std::sin(0.01);
  ExpectValues(out[0], {5, 6, 7, 8, 1 * c1 - 2 * s1, 2 * c1 + 1 * s1, 3 * c2 - 4 * s2, 4 * c2 + 3 * s2}, 1e-12);
  EXPECT_EQ(out[1].shape(), (Shape{0}));
  EXPECT_EQ(out[2].shape(), (Shape{0}));
}

TEST(FusedRopeTest, RotateHalfStyle) {
  const std::vector<Tensor> out = RunOk("fused_rope", {kQ}, {{"use_neox_rotary_style", false}});
  ASSERT_EQ(out.size(), 3u);
  const double c1 = std::cos(1.0), s1 = std::sin(1.0), c2 = std::cos(0.01), s2 = std::sin(0.01);
  ExpectValues(out[0], {5, 6, 7, 8, 1 * c1 - 3 * s1, 2 * c2 - 4 * s2, 3 * c1 + 1 * s1, 4 * c2 + 2 * s2}, 1e-12);
}

TEST(FusedRopeTest, GivenTablesAndPositionIdsMatchComputedOnes) {
  // Tables for positions 0..3; position_ids (3, 1) pick rows 3 and 1.
  const int64_t positions = 4, d = 4;
  std::vector<double> sin(positions * d), cos(positions * d);
  for (int64_t p = 0; p < positions; ++p) {
    for (int64_t j = 0; j < d; ++j) {
      const double theta = static_cast<double>(p) * std::pow(10000.0, -2.0 * static_cast<double>(j / 2) / d);
      sin[p * d + j] = std::sin(theta);
      cos[p * d + j] = std::cos(theta);
    }
  }
  const Tensor k = Random64({1, 2, 2, 4}, 9);
  const Tensor pos = I64({1, 2}, {3, 1});
  const std::vector<Tensor> given =
      RunOk("fused_rope", {kQ, k, Tensor(), F64({positions, d}, sin), F64({positions, d}, cos), pos});
  const std::vector<Tensor> computed = RunOk("fused_rope", {kQ, k, Tensor(), Tensor(), Tensor(), pos});
  ASSERT_EQ(given.size(), 3u);
  ASSERT_EQ(computed.size(), 3u);
  for (int i = 0; i < 2; ++i) ExpectValues(given[i], exec::TensorToDoubles(computed[i]), 1e-12);
  // Position 1 of q is rotated as in AdjacentPairs.
  EXPECT_NEAR(computed[0].At(4), std::cos(1.0) - 2 * std::sin(1.0), 1e-12);
}

TEST(FusedRopeTest, Errors) {
  const ir::TensorType q{{1, 2, 1, 3}, DataType::kFloat32};
  ExpectBuildError("fused_rope", {&q}, {}, "head_dim 3 must be even");
  const ir::TensorType q4{{1, 2, 1, 4}, DataType::kFloat32};
  const ir::TensorType sin{{2, 4}, DataType::kFloat32};
  ExpectBuildError("fused_rope", {&q4, nullptr, nullptr, &sin, nullptr}, {}, "sin and cos must be given together");
  const ir::TensorType pos{{1, 3}, DataType::kInt64};
  ExpectBuildError("fused_rope", {&q4, nullptr, nullptr, nullptr, nullptr, &pos}, {}, "position_ids must be i64[1,2]");
  const auto out = pdist::testing::RunOp("fused_rope",
                                         {kQ, Tensor(), Tensor(), F64({2, 4}, std::vector<double>(8, 0)),
                                          F64({2, 4}, std::vector<double>(8, 1)), I64({1, 2}, {0, 2})},
                                         {});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(std::string(out.status().message()), ::testing::HasSubstr("position id 2"));
}

TEST(FusedRopeTest, Gradients) {
  ExpectGradientsOk("fused_rope", {{Random64({2, 3, 2, 4}, 1)}, {Random64({2, 3, 1, 4}, 2)}}, {});
  ExpectGradientsOk("fused_rope", {{Random64({2, 3, 2, 4}, 3)}, {Tensor()}, {Random64({2, 3, 2, 4}, 4)}},
                    {{"use_neox_rotary_style", false}, {"time_major", true}});
  // Arbitrary (non-trigonometric) tables: the gradient is the exact transpose of the map.
  ExpectGradientsOk("fused_rope",
                    {{Random64({1, 2, 1, 4}, 5)},
                     {Tensor()},
                     {Tensor()},
                     {Random64({3, 4}, 6), false},
                     {Random64({3, 4}, 7), false},
                     {I64({1, 2}, {2, 0})}},
                    {});
}

// Naive attention for q [b, sq, h, d], k/v [b, sk, hk, d]: returns out and lse.
struct Reference {
  std::vector<double> out, lse;
};
Reference NaiveAttention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, const Tensor* mask) {
  const int64_t b = q.shape()[0], sq = q.shape()[1], h = q.shape()[2], d = q.shape()[3];
  const int64_t sk = k.shape()[1], hk = k.shape()[2], dv = v.shape()[3];
  Reference r{std::vector<double>(b * sq * h * dv, 0), std::vector<double>(b * h * sq, 0)};
  for (int64_t bi = 0; bi < b; ++bi) {
    for (int64_t hi = 0; hi < h; ++hi) {
      const int64_t kh = hi / (h / hk);
      for (int64_t i = 0; i < sq; ++i) {
        std::vector<double> s(sk, -std::numeric_limits<double>::infinity());
        double max = s[0];
        for (int64_t j = 0; j < sk; ++j) {
          if (causal && j > i + sk - sq) continue;
          double dot = 0;
          for (int64_t e = 0; e < d; ++e)
            dot += q.At(((bi * sq + i) * h + hi) * d + e) * k.At(((bi * sk + j) * hk + kh) * d + e);
          s[j] = dot / std::sqrt(static_cast<double>(d));
          if (mask) s[j] += mask->At(((bi * h + hi) * sq + i) * sk + j);
          max = std::max(max, s[j]);
        }
        if (std::isinf(max)) {  // no visible key: out = 0, lse = -inf
          r.lse[(bi * h + hi) * sq + i] = max;
          continue;
        }
        double sum = 0;
        for (int64_t j = 0; j < sk; ++j) sum += std::exp(s[j] - max);
        r.lse[(bi * h + hi) * sq + i] = max + std::log(sum);
        for (int64_t j = 0; j < sk; ++j) {
          const double p = std::exp(s[j] - max) / sum;
          for (int64_t e = 0; e < dv; ++e)
            r.out[((bi * sq + i) * h + hi) * dv + e] += p * v.At(((bi * sk + j) * hk + kh) * dv + e);
        }
      }
    }
  }
  return r;
}

TEST(FlashAttnTest, MatchesNaiveReference) {
  const Tensor q = Random64({2, 5, 2, 3}, 1), k = Random64({2, 5, 2, 3}, 2), v = Random64({2, 5, 2, 3}, 3);
  for (bool causal : {false, true}) {
    const std::vector<Tensor> out = RunOk("flash_attn", {q, k, v}, {{"causal", causal}});
    ASSERT_EQ(out.size(), 4u);
    const Reference ref = NaiveAttention(q, k, v, causal, nullptr);
    ExpectValues(out[0], ref.out, 1e-12, causal ? "causal out" : "out");
    ExpectValues(out[2], ref.lse, 1e-12, "lse");
    EXPECT_EQ(out[1].shape(), (Shape{0}));
    EXPECT_EQ(out[3].type(), (ir::TensorType{{2}, DataType::kInt64}));
  }
}

TEST(FlashAttnTest, GroupedQueryCrossAttentionWithMask) {
  // 4 q heads share 2 kv heads; 3 queries attend 5 keys (causal: bottom-right aligned).
  const Tensor q = Random64({1, 3, 4, 2}, 4), k = Random64({1, 5, 2, 2}, 5), v = Random64({1, 5, 2, 3}, 6);
  const Tensor mask = Random64({1, 4, 3, 5}, 7);
  for (bool causal : {false, true}) {
    const std::vector<Tensor> out = RunOk("flash_attention", {q, k, v, Tensor(), mask}, {{"causal", causal}});
    ASSERT_EQ(out.size(), 4u);
    const Reference ref = NaiveAttention(q, k, v, causal, &mask);
    ExpectValues(out[0], ref.out, 1e-12);
    ExpectValues(out[2], ref.lse, 1e-12);
  }
}

TEST(FlashAttnTest, CausalQueriesWithoutVisibleKeysGiveZeros) {
  // 4 queries, 2 keys, bottom-right aligned: queries 0 and 1 see no key at all.
  const Tensor q = Random64({1, 4, 1, 2}, 13), k = Random64({1, 2, 1, 2}, 14), v = Random64({1, 2, 1, 2}, 15);
  const std::vector<Tensor> out = RunOk("flash_attn", {q, k, v}, {{"causal", true}});
  ASSERT_EQ(out.size(), 4u);
  const Reference ref = NaiveAttention(q, k, v, true, nullptr);
  ExpectValues(out[0], ref.out, 1e-12);
  EXPECT_EQ(out[0].At(0), 0.0);
  EXPECT_EQ(out[2].At(1), -std::numeric_limits<double>::infinity());
  EXPECT_NEAR(out[2].At(2), ref.lse[2], 1e-12);
  ExpectGradientsOk("flash_attn", {{q}, {k}, {v}}, {{"causal", true}}, {0});
}

TEST(FlashAttnTest, ReturnsSoftmaxWhenAsked) {
  const Tensor q = Random64({1, 3, 1, 2}, 8), k = Random64({1, 3, 1, 2}, 9), v = Random64({1, 3, 1, 2}, 10);
  const std::vector<Tensor> out = RunOk("flash_attn", {q, k, v}, {{"causal", true}, {"return_softmax", true}});
  ASSERT_EQ(out.size(), 4u);
  ASSERT_EQ(out[1].shape(), (Shape{1, 1, 3, 3}));
  // Row 0 sees only key 0; every row sums to 1 and is zero above the diagonal.
  EXPECT_DOUBLE_EQ(out[1].At(0), 1.0);
  for (int i = 0; i < 3; ++i) {
    double sum = 0;
    for (int j = 0; j < 3; ++j) {
      sum += out[1].At(i * 3 + j);
      if (j > i) {
        EXPECT_EQ(out[1].At(i * 3 + j), 0.0);
      }
    }
    EXPECT_NEAR(sum, 1.0, 1e-12);
  }
}

TEST(FlashAttnTest, Float32) {
  const Tensor q = pdist::testing::RandomTensor({{1, 130, 2, 8}, DataType::kFloat32}, 11);
  const std::vector<Tensor> out = RunOk("flash_attn", {q, q, q}, {{"causal", true}});
  ASSERT_EQ(out.size(), 4u);
  const Reference ref = NaiveAttention(q, q, q, true, nullptr);
  ExpectValues(out[0], ref.out, 1e-5);
}

TEST(FlashAttnTest, DropoutIsUnimplementedOnCpu) {
  const Tensor q = Random64({1, 2, 1, 2}, 12);
  const auto out = pdist::testing::RunOp("flash_attn", {q, q, q}, {{"dropout", 0.1}});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(pdist::testing::RunOp("flash_attn", {q, q, q}, {{"dropout", 0.1}, {"is_test", true}}).ok());
}

TEST(FlashAttnTest, ShapeErrors) {
  const ir::TensorType q{{2, 8, 4, 16}, DataType::kFloat32};
  const ir::TensorType k3{{2, 8, 3, 16}, DataType::kFloat32};
  ExpectBuildError("flash_attn", {&q, &k3, &k3}, {}, "multiple of k heads 3");
  const ir::TensorType k_dim{{2, 8, 4, 8}, DataType::kFloat32};
  ExpectBuildError("flash_attn", {&q, &k_dim, &k_dim}, {}, "must share");
  const ir::TensorType mask{{2, 4, 8, 7}, DataType::kFloat32};
  ExpectBuildError("flash_attn", {&q, &q, &q, nullptr, &mask}, {}, "attn_mask must be");
  const ir::TensorType q3{{2, 8, 64}, DataType::kFloat32};
  ExpectBuildError("flash_attn", {&q3, &q3, &q3}, {}, "rank 4");
}

TEST(FlashAttnTest, CostIsFourBHS2DHalvedByCausal) {
  const ir::OpDef* fwd = ir::OpRegistry::Global().Find("flash_attn");
  const ir::OpDef* bwd = ir::OpRegistry::Global().Find("flash_attn_grad");
  ASSERT_NE(fwd, nullptr);
  ASSERT_NE(bwd, nullptr);
  const ir::TensorType q{{2, 128, 8, 64}, DataType::kFloat32};
  const double flops = 4.0 * 2 * 8 * 128 * 128 * 64;
  EXPECT_DOUBLE_EQ(fwd->cost({&q, &q, &q}, {}, {{"causal", false}}).flops, flops);
  EXPECT_DOUBLE_EQ(fwd->cost({&q, &q, &q}, {}, {{"causal", true}}).flops, flops / 2);
  EXPECT_DOUBLE_EQ(bwd->cost({&q, &q, &q}, {}, {{"causal", true}}).flops, 2.5 * flops / 2);
}

TEST(FlashAttnTest, Gradients) {
  for (bool causal : {false, true}) {
    ExpectGradientsOk("flash_attn",
                      {{Random64({2, 3, 2, 2}, 1)}, {Random64({2, 3, 2, 2}, 2)}, {Random64({2, 3, 2, 2}, 3)}},
                      {{"causal", causal}}, {0});
  }
  // Grouped-query, cross-length, causal, with a mask (held fixed).
  ExpectGradientsOk("flash_attn",
                    {{Random64({1, 3, 4, 2}, 4)},
                     {Random64({1, 4, 2, 2}, 5)},
                     {Random64({1, 4, 2, 3}, 6)},
                     {Tensor()},
                     {Random64({1, 1, 3, 4}, 7), false}},
                    {{"causal", true}}, {0});
}

}  // namespace
}  // namespace pdist::nn_test
