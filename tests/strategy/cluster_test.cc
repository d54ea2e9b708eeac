// Cluster descriptions: presets with their data-sheet numbers, the JSON form and its errors.
#include "strategy/cluster.h"

#include <gtest/gtest.h>

namespace pdist::strategy {
namespace {

TEST(ClusterPresetTest, FillsNodesOfEightWithDataSheetNumbers) {
  auto a100 = ClusterPreset("dgx-a100", 16);
  ASSERT_TRUE(a100.ok()) << a100.status();
  EXPECT_EQ(a100->nodes, 2);
  EXPECT_EQ(a100->devices_per_node, 8);
  EXPECT_EQ(a100->num_devices(), 16);
  EXPECT_DOUBLE_EQ(a100->device.memory, 80e9);
  EXPECT_DOUBLE_EQ(*a100->PeakFlops(ir::DataType::kBFloat16), 312e12);
  EXPECT_DOUBLE_EQ(a100->intra_node.bandwidth, 230e9);  // nccl-tests' all-reduce busbw on NVLink3
  EXPECT_DOUBLE_EQ(a100->inter_node.bandwidth, 23.5e9);  // 188 GB/s over a node's 8 HDR NICs

  auto h200 = ClusterPreset("hgx-h200", 4);
  ASSERT_TRUE(h200.ok()) << h200.status();
  EXPECT_EQ(h200->num_devices(), 4);
  EXPECT_DOUBLE_EQ(h200->device.memory, 141e9);
  EXPECT_DOUBLE_EQ(h200->device.memory_bandwidth, 4.8e12);
  EXPECT_DOUBLE_EQ(h200->intra_node.bandwidth, 365e9);  // NVLink4 with the ring (no NVLS)
  // Hopper's own efficiencies, fitted to the published H100 runs; the A100 keeps the defaults
  // but for FlashAttention-2's slower backward there.
  EXPECT_DOUBLE_EQ(h200->device.efficiency.gemm, 0.825);
  EXPECT_DOUBLE_EQ(h200->device.efficiency.gemm_half_intensity, 64);  // narrow GEMMs' toll
  EXPECT_DOUBLE_EQ(a100->device.efficiency.gemm_half_intensity, 0);
  EXPECT_DOUBLE_EQ(h200->device.efficiency.fused_attention, 0.175);
  EXPECT_DOUBLE_EQ(h200->device.efficiency.fused_attention_backward, 1);
  EXPECT_EQ(ClusterPreset("dgx-h100", 8)->device.efficiency, h200->device.efficiency);
  Efficiency ampere;
  ampere.fused_attention_backward = 0.67;
  EXPECT_EQ(a100->device.efficiency, ampere);

  auto uneven = ClusterPreset("dgx-h100", 12);
  ASSERT_FALSE(uneven.ok());
  EXPECT_NE(uneven.status().message().find("12 devices do not fill 8-device nodes"), std::string::npos);
  auto unknown = ClusterPreset("tpu-v5", 8);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("dgx-a100, dgx-a100-40gb, dgx-h100, hgx-h200"), std::string::npos)
      << unknown.status();
  auto a100_40 = ClusterPreset("dgx-a100-40gb", 16);
  ASSERT_TRUE(a100_40.ok()) << a100_40.status();
  EXPECT_DOUBLE_EQ(a100_40->device.memory, 40e9);
  EXPECT_DOUBLE_EQ(a100_40->device.memory_bandwidth, 1555e9);  // HBM2, where the 80 GB has HBM2e
  EXPECT_EQ(a100_40->device.peak_flops, a100->device.peak_flops);
  EXPECT_EQ(a100_40->inter_node, a100->inter_node);
  auto int_peak = a100->PeakFlops(ir::DataType::kInt32);
  ASSERT_FALSE(int_peak.ok());
  EXPECT_NE(int_peak.status().message().find("lists bf16, f16, f32, f64"), std::string::npos) << int_peak.status();
}

// A path that is not there is a missing file (it was "the number of devices is needed with
// the preset '/tmp/nope.json'"); a preset of more devices than a job can have is refused before
// a search over them (2^40 devices searched for minutes).
TEST(ClusterPresetTest, AMissingFileAndAnAbsurdCountAreNamed) {
  absl::StatusOr<Cluster> missing = ClusterFromFileOrPreset("/nonexistent/nope.json", 0);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("cluster file '/nonexistent/nope.json' does not exist"), std::string::npos)
      << missing.status();
  absl::StatusOr<Cluster> huge = ClusterFromFileOrPreset("dgx-a100", int64_t{1} << 40);
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("1099511627776 devices: at most 1048576"), std::string::npos) << huge.status();
  EXPECT_TRUE(ClusterFromFileOrPreset("dgx-a100", 1 << 20).ok());
}

TEST(ParseClusterTest, WrittenJsonReadsBack) {
  for (const std::string& name : ClusterPresetNames()) {
    auto preset = ClusterPreset(name, 32);
    ASSERT_TRUE(preset.ok()) << preset.status();
    preset->shared_cores = 3;
    preset->shared_cores_efficiency = 0.8;
    preset->device.efficiency.gemm = 0.75;
    preset->device.efficiency.fused_attention = 0.3;
    preset->device.efficiency.gemm_half_intensity = 64;
    preset->device.efficiency.fused_attention_backward = 0.6;
    preset->device.efficiency.attention = Efficiency::Attention::kUnfused;
    preset->device.efficiency.op_scale = {{"add", 1.5}, {"add@bf16", 4.25}};
    auto back = ParseCluster(ClusterToJson(*preset));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->name, preset->name);
    EXPECT_EQ(back->nodes, 4);
    EXPECT_EQ(back->device.peak_flops.size(), preset->device.peak_flops.size());
    for (const auto& [dtype, flops] : preset->device.peak_flops) {
      EXPECT_NEAR(back->device.peak_flops.at(dtype), flops, flops * 1e-12) << dtype;
    }
    EXPECT_NEAR(back->inter_node.latency, preset->inter_node.latency, 1e-18);
    EXPECT_EQ(back->shared_cores, 3);
    EXPECT_DOUBLE_EQ(back->shared_cores_efficiency, 0.8);
    EXPECT_DOUBLE_EQ(back->device.efficiency.gemm, 0.75);
    EXPECT_DOUBLE_EQ(back->device.efficiency.fused_attention, 0.3);
    EXPECT_DOUBLE_EQ(back->device.efficiency.gemm_half_intensity, 64);
    EXPECT_DOUBLE_EQ(back->device.efficiency.fused_attention_backward, 0.6);
    EXPECT_EQ(back->device.efficiency.attention, Efficiency::Attention::kUnfused);
    EXPECT_EQ(back->device.efficiency.op_scale, preset->device.efficiency.op_scale);
    EXPECT_NEAR(back->device.memory, preset->device.memory, 1);
  }
}

TEST(ParseClusterTest, ErrorsNameTheKeyPath) {
  const std::string good_device =
      R"("device": {"name": "x", "memory_gb": 16, "memory_bandwidth_gbps": 900, "peak_tflops": {"f32": 15}})";
  const std::string links = R"("intra_node": {"bandwidth_gbps": 150, "latency_us": 3}, "inter_node": {"bandwidth_gbps": 12.5, "latency_us": 10})";
  auto ok = ParseCluster("{\"nodes\": 2, \"devices_per_node\": 4, " + good_device + ", " + links + "}");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_DOUBLE_EQ(ok->inter_node.bandwidth, 12.5e9);
  EXPECT_DOUBLE_EQ(ok->intra_node.latency, 3e-6);

  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"nodes\": 2, \"devices_per_node\": 4, \"device\": {\"name\": \"x\", \"memroy_gb\": 16}, " + links + "}",
       "unknown cluster key 'device.memroy_gb'"},
      {"{\"nodes\": 0, \"devices_per_node\": 4, " + good_device + ", " + links + "}",
       "'nodes' must be an integer in [1, 1048576], got 0"},
      {"{\"nodes\": 2, \"devices_per_node\": 4, " + good_device + "}", "'intra_node' is missing"},
      {"{\"nodes\": 2, \"devices_per_node\": 4, " + good_device +
           R"(, "intra_node": {"bandwidth_gbps": -1, "latency_us": 3}, "inter_node": {"bandwidth_gbps": 1, "latency_us": 1}})",
       "'intra_node.bandwidth_gbps' must be a positive number in [1e-12, 1e12], got -1"},
      {R"({"nodes": 1, "devices_per_node": 1, "device": {"name": "x", "memory_gb": 1, "memory_bandwidth_gbps": 1,
          "peak_tflops": {"fp99": 1}}, )" + links + "}",
       "'device.peak_tflops.fp99': not a dtype"},
      {"{not json", "not valid JSON"},
      {"{\"nodes\": 1, \"devices_per_node\": 4, \"shared_cores\": 0, " + good_device + ", " + links + "}",
       "'shared_cores' must be an integer in [1, 1048576], got 0"},
      {"{\"nodes\": 1, \"devices_per_node\": 4, \"shared_cores_efficiency\": 1.2, " + good_device + ", " + links + "}",
       "'shared_cores_efficiency' must be a number in (0, 1], got 1.2"},
      {R"({"nodes": 1, "devices_per_node": 1, "device": {"name": "x", "memory_gb": 1, "memory_bandwidth_gbps": 1,
          "peak_tflops": {"f32": 1}, "efficiency": {"gemm_half_intensity": -3}}, )" + links + "}",
       "'device.efficiency.gemm_half_intensity' must be 0 or a positive number in [1e-12, 1e12], got -3"},
      {R"({"nodes": 1, "devices_per_node": 1, "device": {"name": "x", "memory_gb": 1, "memory_bandwidth_gbps": 1,
          "peak_tflops": {"f32": 1}, "efficiency": {"gemm": 1.5}}, )" + links + "}",
       "'device.efficiency.gemm' must be a number in (0, 1], got 1.5"},
      {R"({"nodes": 1, "devices_per_node": 1, "device": {"name": "x", "memory_gb": 1, "memory_bandwidth_gbps": 1,
          "peak_tflops": {"f32": 1}, "efficiency": {"fused_attention_backward": 0}}, )" + links + "}",
       "'device.efficiency.fused_attention_backward' must be a number in (0, 1], got 0"},
      {R"({"nodes": 1, "devices_per_node": 1, "device": {"name": "x", "memory_gb": 1, "memory_bandwidth_gbps": 1,
          "peak_tflops": {"f32": 1}, "efficiency": {"attention": "flash"}}, )" + links + "}",
       "'device.efficiency.attention' must be \"fused\" or \"unfused\", got \"flash\""},
      // Absurd sizes are refused, not allocated for or wrapped ("-4 devices").
      {"{\"nodes\": 9223372036854775807, \"devices_per_node\": 4, " + good_device + ", " + links + "}",
       "'nodes' must be an integer in [1, 1048576], got 9223372036854775807"},
      {"{\"nodes\": 4096, \"devices_per_node\": 4096, " + good_device + ", " + links + "}",
       "cluster devices nodes × devices_per_node = 4096 × 4096 is more than 1048576"},
      {"{\"nodes\": 2, \"devices_per_node\": 4, " + good_device +
           R"(, "intra_node": {"bandwidth_gbps": 5e-324, "latency_us": 3}, "inter_node": {"bandwidth_gbps": 1, "latency_us": 1}})",
       "'intra_node.bandwidth_gbps' must be a positive number in [1e-12, 1e12], got 5e-324"},
      {"{\"nodes\": 2, \"nodes\": 3, \"devices_per_node\": 4, " + good_device + ", " + links + "}",
       "duplicate key 'nodes'"},
      // An op scale names an op, or an op and a low-precision dtype.
      {R"({"nodes": 1, "devices_per_node": 1, "device": {"name": "x", "memory_gb": 1, "memory_bandwidth_gbps": 1,
          "peak_tflops": {"f32": 1}, "efficiency": {"op_scale": {"nope@bf16": 2}}}, )" + links + "}",
       "'device.efficiency.op_scale.nope@bf16': no op 'nope'"},
      {R"({"nodes": 1, "devices_per_node": 1, "device": {"name": "x", "memory_gb": 1, "memory_bandwidth_gbps": 1,
          "peak_tflops": {"f32": 1}, "efficiency": {"op_scale": {"add@f32": 2}}}, )" + links + "}",
       "'device.efficiency.op_scale.add@f32': 'f32' is not bf16 or f16 (f32 and f64 take the plain 'add')"},
  };
  for (const auto& [text, message] : cases) {
    auto c = ParseCluster(text);
    ASSERT_FALSE(c.ok()) << text;
    EXPECT_NE(std::string(c.status().message()).find(message), std::string::npos) << c.status();
  }
}

}  // namespace
}  // namespace pdist::strategy

#ifdef PDIST_SOURCE_DIR
#include <filesystem>
#include <fstream>
#include <sstream>

namespace pdist::strategy {
namespace {

// Every example cluster file parses.
TEST(ParseClusterTest, ExampleFilesParse) {
  int parsed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(PDIST_SOURCE_DIR) + "/examples/clusters")) {
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    auto c = ParseCluster(text.str());
    EXPECT_TRUE(c.ok()) << entry.path() << ": " << c.status();
    ++parsed;
  }
  EXPECT_GE(parsed, 2);
}

}  // namespace
}  // namespace pdist::strategy
#endif  // PDIST_SOURCE_DIR
