// Calibration's fits recover the parameters that generated their timings: a GEMM curve, a
// ring all-reduce link, and per-op scales with their dead band and clamp.
#include "calibration/fit.h"

#include <gtest/gtest.h>

namespace pdist::calibration {
namespace {

// Seconds of a GEMM of `flops` on a device of rate P·f/(f + h), plus a launch overhead.
double GemmSeconds(double flops, double peak, double half, double overhead) {
  return flops / (peak * flops / (flops + half)) + overhead;
}

TEST(FitTest, GemmCurveRecoversPeakAndHalfSize) {
  const double peak = 3.1e11, half = 4.0e6, overhead = 2e-6;
  const double fl = 2.0 * 512 * 512 * 512, fs = 2.0 * 48 * 48 * 48;
  const GemmCurve g = FitGemmCurve({fl, GemmSeconds(fl, peak, half, overhead)}, {fs, GemmSeconds(fs, peak, half, overhead)},
                                   overhead);
  EXPECT_NEAR(g.peak_flops, peak, 1e-9 * peak);
  EXPECT_NEAR(g.half_flops, half, 1e-6 * half);
}

TEST(FitTest, GemmCurveWithoutSizeEffectHasNoHalfSize) {
  // The small GEMM as fast per FLOP as the large one (or faster, by noise): rate is flat.
  const double fl = 2.7e8, fs = 2.2e5, rate = 1e11;
  const GemmCurve g = FitGemmCurve({fl, fl / rate}, {fs, fs / (1.2 * rate)}, 0);
  EXPECT_EQ(g.half_flops, 0);
  EXPECT_NEAR(g.peak_flops, rate, 1e-6 * rate);
}

TEST(FitTest, AllReduceLinkRecoversBandwidthAndLatency) {
  const int64_t ranks = 4;
  const double n = 4, alpha = 3e-6, beta = 9e9, bytes = 16.0 * (1 << 20);
  const double large = 2 * (n - 1) * alpha + 2 * (n - 1) / n * bytes / beta;
  const double small = 2 * (n - 1) * alpha;  // one element: latency only
  const Link link = FitAllReduceLink(ranks, bytes, large, small);
  EXPECT_NEAR(link.latency, alpha, 1e-12);
  EXPECT_NEAR(link.bandwidth, beta, 1e-6 * beta);
}

TEST(FitTest, OpScalesKeepMissesOverTenPercentAndClampBrokenOnes) {
  const std::map<std::string, double> predicted = {
      {"matmul", 1.0}, {"softmax", 1.0}, {"gelu", 2.0}, {"add", 1e-3}, {"tanh", 1.0}, {"relu", 0.0}};
  const std::map<std::string, double> measured = {
      {"matmul", 1.05},   // within 10%: the roofline is right
      {"softmax", 2.5},   // 2.5× slower than predicted
      {"gelu", 1.0},      // twice as fast
      {"add", 1.0},       // 1000×: clamped to 20
      {"relu", 1.0},      // predicted free: no ratio
      {"dropout", 1.0}};  // not predicted
  const std::map<std::string, double> scales = OpScalesFrom(measured, predicted);
  const std::map<std::string, double> want = {{"softmax", 2.5}, {"gelu", 0.5}, {"add", 20.0}};
  EXPECT_EQ(scales, want);
}

TEST(FitTest, LowPrecisionScalesAreTheTypesThatRanWhollyInTheDtype) {
  const std::map<std::string, double> predicted = {
      {"add@bf16", 1.0}, {"matmul@bf16", 1.0}, {"softmax", 1.0}, {"gelu@bf16", 1.0}, {"gelu", 1.0}, {"tanh@bf16", 1.0}};
  const std::map<std::string, double> measured = {
      {"add", 4.0},      // 4× the roofline in bf16: its own scale
      {"matmul", 2.1},   // what the f32 scale (2) says already, within 10%: none
      {"softmax", 3.0},  // ran in f32 in this step: the f32 scale is the plain one's business
      {"gelu", 5.0},     // some in bf16, some in f32: cannot be split
      {"tanh", 30.0}};   // a broken measurement: clamped
  const std::map<std::string, double> plain = {{"matmul", 2.0}};
  const std::map<std::string, double> want = {{"add@bf16", 4.0}, {"tanh@bf16", 20.0}};
  EXPECT_EQ(LowPrecisionOpScalesFrom(measured, predicted, "bf16", plain), want);
}

}  // namespace
}  // namespace pdist::calibration
