// Calibration measures this machine through pdist's executor and communicator: it takes every
// step it announces, measures a rate for each field of a cluster file (the arithmetic from
// timings to rates is checked against known parameters in fit_test.cc; here the timings are
// real, so only what no clamp guarantees is asserted), and the result parses back.
#include "calibration/calibrate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "executor/executor.h"
#include "ir/op_def.h"

namespace pdist::calibration {
namespace {

TEST(CalibrateTest, MeasuresEveryRateOfTwoRanks) {
  std::vector<std::string> steps;
  absl::StatusOr<strategy::Cluster> c = CalibrateCpu(2, [&](const std::string& s) { steps.push_back(s); });
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_devices(), 2);
  EXPECT_EQ(steps.size(), c->shared_cores >= 2 ? 10u : 11u);  // one core: the time-slicing step too
  // Only op types of the reference step get a scale, some of them in bf16 alone: the CPU's bf16
  // kernels convert each operand to f32 and each result back, which the roofline does not see.
  bool bf16 = false;
  for (const auto& [key, scale] : c->device.efficiency.op_scale) {
    const std::string op = key.substr(0, key.find('@'));
    EXPECT_TRUE(ir::OpRegistry::Global().Find(op) != nullptr) << key;
    bf16 = bf16 || key.ends_with("@bf16");
  }
  EXPECT_TRUE(bf16);
  for (double v : {c->device.memory, c->device.memory_bandwidth, c->device.peak_flops.at("f32"),
                   c->device.peak_flops.at("f64"), c->device.peak_flops.at("bf16"), c->device.peak_flops.at("f16"),
                   c->device.efficiency.op_overhead}) {
    EXPECT_TRUE(std::isfinite(v) && v > 0) << v;
  }
  absl::StatusOr<strategy::Cluster> back = strategy::ParseCluster(strategy::ClusterToJson(*c));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_NEAR(back->device.peak_flops.at("f32"), c->device.peak_flops.at("f32"), 1e-9 * c->device.peak_flops.at("f32"));
  EXPECT_FALSE(CalibrateCpu(0).ok());
}

// Twice as many ranks as cores: the ranks are time-sliced, and how well is measured.
TEST(CalibrateTest, MeasuresTimeSlicingOfMoreRanksThanCores) {
  std::vector<std::string> steps;
  const int64_t cores = std::max(1, exec::KernelThreadsOfThisThread());
  absl::StatusOr<strategy::Cluster> c = CalibrateCpu(2 * cores, [&](const std::string& s) { steps.push_back(s); });
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->shared_cores, cores);
  EXPECT_EQ(steps.back(), "time slicing");  // its value is clamped to (0, 1]: nothing to assert
}

}  // namespace
}  // namespace pdist::calibration
