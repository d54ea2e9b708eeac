// The NCCL communicator on one GPU (a machine lends one; NCCL does not put two ranks of a
// communicator on the same device): the collectives on device tensors enqueued on a stream,
// host tensors staged, Split, and the deadline of a rank that never joins. Skipped, with the
// reason, where the build has no CUDA backend or the machine no GPU; scripts/device-check.sh
// runs it on a GPU, where a skip is a failure.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "executor/backend.h"
#include "executor/comm/kv_store.h"
#include "executor/tensor.h"

#ifdef PDIST_HAVE_CUDA
#include "executor/cuda/nccl_communicator.h"
#endif

namespace pdist::exec {
namespace {

using ::testing::HasSubstr;

class NcclCommunicatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef PDIST_HAVE_CUDA
    GTEST_SKIP() << "this build has no CUDA backend (-DPDIST_WITH_CUDA=ON)";
#else
    absl::StatusOr<Backend*> gpu = BackendFor(Device::Cuda(0));
    if (!gpu.ok()) GTEST_SKIP() << "no GPU here: " << gpu.status().message();
#endif
  }
};

#ifdef PDIST_HAVE_CUDA

Tensor OnGpu(const std::vector<double>& values, ir::DataType dtype = ir::DataType::kFloat32) {
  return *ToDevice(TensorFromDoubles({{static_cast<int64_t>(values.size())}, dtype}, values), Device::Cuda(0));
}

std::vector<double> Back(const Tensor& t) { return TensorToDoubles(*ToDevice(t, Device::Cpu())); }

TEST_F(NcclCommunicatorTest, OneRankMovesDeviceAndHostTensors) {
  auto store = std::make_shared<comm::InMemoryStore>();
  auto world = cuda::NcclCommunicator::Create(store, 0, 1, Device::Cuda(0), {.timeout = absl::Seconds(60)});
  ASSERT_TRUE(world.ok()) << world.status();
  std::unique_ptr<Stream> stream = (*BackendFor(Device::Cuda(0)))->NewStream(Device::Cuda(0), StreamPurpose::kCommunication);

  for (ir::DataType dtype : {ir::DataType::kFloat32, ir::DataType::kBFloat16}) {
    Tensor x = OnGpu({1, 2, 3, 4}, dtype);
    Tensor sum = OnGpu({0, 0, 0, 0}, dtype);
    ASSERT_TRUE((*world)->AllReduce(x, sum, comm::ReduceOp::kSum, stream.get()).ok());
    ASSERT_TRUE(stream->Synchronize().ok());
    EXPECT_EQ(Back(sum), (std::vector<double>{1, 2, 3, 4}));
  }
  Tensor gathered = OnGpu({0, 0});
  ASSERT_TRUE((*world)->AllGather(OnGpu({5, 6}), gathered).ok());  // no stream: waits
  EXPECT_EQ(Back(gathered), (std::vector<double>{5, 6}));
  Tensor buffer = OnGpu({7, 8});
  ASSERT_TRUE((*world)->Broadcast(buffer, 0).ok());
  EXPECT_EQ(Back(buffer), (std::vector<double>{7, 8}));

  // Host tensors go through device buffers.
  Tensor host = TensorFromDoubles({{3}, ir::DataType::kFloat64}, {1.5, 2.5, 3.5});
  ASSERT_TRUE((*world)->AllReduce(host, host, comm::ReduceOp::kMax).ok());
  EXPECT_EQ(TensorToDoubles(host), (std::vector<double>{1.5, 2.5, 3.5}));
  ASSERT_TRUE((*world)->Barrier().ok());

  absl::StatusOr<std::shared_ptr<comm::Communicator>> sub = (*world)->Split(0, 0);
  ASSERT_TRUE(sub.ok()) << sub.status();
  EXPECT_EQ((*sub)->name(), "world/{0}");
  Tensor y = OnGpu({9});
  ASSERT_TRUE((*sub)->AllReduce(y, y, comm::ReduceOp::kAvg).ok());
  EXPECT_EQ(Back(y), (std::vector<double>{9}));
  EXPECT_TRUE((*world)->AsyncError().ok());
}

TEST_F(NcclCommunicatorTest, ARankThatNeverJoinsIsADeadlineNotAHang) {
  auto store = std::make_shared<comm::InMemoryStore>();
  auto world = cuda::NcclCommunicator::Create(store, 0, 2, Device::Cuda(0), {.timeout = absl::Seconds(3)});
  ASSERT_FALSE(world.ok());
  EXPECT_EQ(world.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(world.status().message()), HasSubstr("not every rank of 2 arrived"));
  // A rank waiting for an id nobody posts names the key it waited for.
  auto late = cuda::NcclCommunicator::Create(std::make_shared<comm::InMemoryStore>(), 1, 2, Device::Cuda(0),
                                             {.timeout = absl::Milliseconds(100), .name = "tp"});
  ASSERT_FALSE(late.ok());
  EXPECT_THAT(std::string(late.status().message()), HasSubstr("'nccl/tp/id'"));
}

#else

TEST_F(NcclCommunicatorTest, OneRankMovesDeviceAndHostTensors) {}
TEST_F(NcclCommunicatorTest, ARankThatNeverJoinsIsADeadlineNotAHang) {}

#endif

}  // namespace
}  // namespace pdist::exec
