// Calibration measures this machine through pdist's executor and communicator: every rate comes
// out positive and finite, the size curve puts small matmuls below large ones, and the result
// is a cluster file the parser takes back.
#include "planner/calibrate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "executor/executor.h"
#include "planner/compute_cost.h"

namespace pdist::planner {
namespace {

TEST(CalibrateTest, MeasuresEveryRateOfTwoRanks) {
  std::vector<std::string> steps;
  absl::StatusOr<strategy::Cluster> c = CalibrateCpu(2, [&](const std::string& s) { steps.push_back(s); });
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_devices(), 2);
  EXPECT_EQ(steps.size(), c->shared_cores >= 2 ? 6u : 7u);  // one core: the time-slicing step too
  // The reference step's kernels are scaled where the roofline misjudges them.
  EXPECT_FALSE(c->device.efficiency.op_scale.empty());
  for (const auto& [op, scale] : c->device.efficiency.op_scale) EXPECT_TRUE(scale >= 0.05 && scale <= 20) << op;
  for (double v : {c->device.memory, c->device.memory_bandwidth, c->device.peak_flops.at("f32"),
                   c->device.peak_flops.at("f64"), c->device.efficiency.op_overhead, c->device.efficiency.gemm_half_flops,
                   c->intra_node.bandwidth, c->intra_node.latency}) {
    EXPECT_TRUE(std::isfinite(v) && v > 0) << v;
  }
  // A 48³ matmul is predicted slower per FLOP than a 512³ one.
  const ir::OpCost small{.flops = 2.0 * 48 * 48 * 48, .bytes = 3.0 * 48 * 48 * 4};
  const ir::OpCost large{.flops = 2.0 * 512 * 512 * 512, .bytes = 3.0 * 512 * 512 * 4};
  EXPECT_GT(*ComputeSeconds(c->device, ir::DataType::kFloat32, small) / small.flops,
            *ComputeSeconds(c->device, ir::DataType::kFloat32, large) / large.flops);
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
  EXPECT_EQ(steps.back(), "time slicing");
  EXPECT_GT(c->shared_cores_efficiency, 0.05);
  EXPECT_LE(c->shared_cores_efficiency, 1.0);
}

}  // namespace
}  // namespace pdist::planner
