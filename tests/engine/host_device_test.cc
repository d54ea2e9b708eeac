// The engine on a host device "cpu:N" (executor/device.h): the host's kernels and memory, with the
// state kept apart as a GPU's is. The executor refuses a feed or a state tensor on another device
// and a kernel that leaves a result elsewhere, so a run that passes here has moved every feed,
// state and checkpoint piece where it belongs and back — the discipline a GPU run needs, checked
// without a GPU. The numbers must be exactly the host's: the same kernels run.
#include <filesystem>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "engine/engine.h"
#include "executor/allocator.h"
#include "tests/engine/distributed_test_util.h"

namespace pdist::engine {
namespace {

EngineOptions On(const std::string& device, const std::string& strategy) {
  EngineOptions o = testing::EquivalenceOptions();
  o.device = device;
  o.strategy_json = strategy;
  return o;
}

struct HostDeviceCase {
  std::string name;
  std::string strategy;
  ir::DataType dtype;
};

class HostDeviceTest : public ::testing::TestWithParam<HostDeviceCase> {};

// Losses, evaluation, predictions and every parameter bitwise equal to the same strategy on
// "cpu"; and the device's own allocator held the state.
TEST_P(HostDeviceTest, TrainsExactlyAsTheHost) {
  const HostDeviceCase& c = GetParam();
  const ir::Program model = testing::BuildSmallModel("gpt", c.dtype);
  const exec::AllocatorStats before = exec::HostAllocator::Of(exec::Device{exec::DeviceType::kCPU, 5}).stats();
  const testing::RunOutcome host = testing::TrainSteps(model.Clone(), On("cpu", c.strategy), 3, testing::kSmallVocab);
  const testing::RunOutcome device = testing::TrainSteps(model.Clone(), On("cpu:5", c.strategy), 3, testing::kSmallVocab);
  testing::ExpectSameTraining(device, host, model, /*tol=*/0);
  const exec::AllocatorStats after = exec::HostAllocator::Of(exec::Device{exec::DeviceType::kCPU, 5}).stats();
  EXPECT_GT(after.allocations, before.allocations) << "nothing was allocated on cpu:5";
  for (const auto& [name, tensor] : device.state) EXPECT_TRUE(tensor.device() == exec::Device::Cpu()) << name;
  for (const auto& [name, tensor] : device.predicted) EXPECT_TRUE(tensor.device() == exec::Device::Cpu()) << name;
}

INSTANTIATE_TEST_SUITE_P(
    Strategies, HostDeviceTest,
    ::testing::Values(
        HostDeviceCase{"one_rank_f64", "", ir::DataType::kFloat64},
        HostDeviceCase{"dp2_mp2_sp_f32", R"({"dp_degree": 2, "mp_degree": 2, "sp": true})", ir::DataType::kFloat32},
        HostDeviceCase{"pp2_1f1b_zero3_dp2_f64",
                       R"({"dp_degree": 2, "pp_degree": 2, "pipeline": {"schedule_mode": "1F1B", "accumulate_steps": 2},
                           "sharding": {"enable": true, "stage": 3}})",
                       ir::DataType::kFloat64},
        HostDeviceCase{"recompute_f16_loss_scaling",
                       R"({"recompute": {"enable": true, "granularity": "full"},
                           "amp": {"enable": true, "dtype": "float16", "level": "o2"}})",
                       ir::DataType::kFloat32}),
    [](const ::testing::TestParamInfo<HostDeviceCase>& info) { return info.param.name; });

// A checkpoint written from cpu:N loads on the host and the reverse; training continues as an
// uninterrupted run does.
TEST(HostDeviceCheckpointTest, MovesBetweenDevices) {
  const ir::Program model = testing::BuildSmallModel("gpt", ir::DataType::kFloat64);
  const std::string strategy = R"({"dp_degree": 2, "mp_degree": 2})";
  const testing::RunOutcome straight = testing::TrainSteps(model.Clone(), On("cpu", strategy), 4, testing::kSmallVocab);
  ASSERT_EQ(straight.losses.size(), 4u);
  const std::string dir = ::testing::TempDir() + "/host_device_ckpt";
  std::filesystem::remove_all(dir);
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"cpu:6", "cpu"}, {"cpu", "cpu:6"}}) {
    auto first = Engine::Create(model.Clone(), On(from, strategy));
    ASSERT_TRUE(first.ok()) << first.status();
    for (int64_t s = 0; s < 2; ++s) {
      auto r = (*first)->TrainStep(testing::RandomTokenBatch(model, s, testing::kSmallVocab));
      ASSERT_TRUE(r.ok()) << r.status();
    }
    const std::string path = absl::StrCat(dir, "/", from, "_to_", to);
    ASSERT_TRUE((*first)->Save(path).ok());
    auto second = Engine::Create(model.Clone(), On(to, strategy));
    ASSERT_TRUE(second.ok()) << second.status();
    ASSERT_TRUE((*second)->Load(path).ok());
    for (int64_t s = 2; s < 4; ++s) {
      auto r = (*second)->TrainStep(testing::RandomTokenBatch(model, s, testing::kSmallVocab));
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->loss, straight.losses[static_cast<size_t>(s)]) << from << " -> " << to << ", step " << s;
    }
  }
}

}  // namespace
}  // namespace pdist::engine
