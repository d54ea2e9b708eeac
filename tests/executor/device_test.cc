// The device layer: device names, the backend list and its answers for devices this build or
// machine cannot run, the host allocator's accounting, out-of-memory as an error naming the op,
// and the CPU streams' ordering.
#include "executor/device.h"

#include <atomic>
#include <chrono>
#include <latch>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "executor/backend.h"
#include "executor/cpu_stream.h"
#include "executor/executor.h"
#include "ir/builder.h"

namespace pdist::exec {
namespace {

using ::testing::HasSubstr;
using ir::DataType;

TEST(DeviceTest, ParsesTheThreeFormsAndPrintsThemBack) {
  EXPECT_EQ(*ParseDevice("cpu"), Device::Cpu());
  EXPECT_EQ(*ParseDevice("cuda"), Device::Cuda(0));
  EXPECT_EQ(*ParseDevice("cuda:3"), Device::Cuda(3));
  EXPECT_EQ(Device::Cuda(3).ToString(), "cuda:3");
  EXPECT_EQ(Device::Cpu().ToString(), "cpu");
  EXPECT_NE(Device::Cpu(), Device::Cuda(0));
}

TEST(DeviceTest, HostDevicesAreNumberedAsGpusAre) {
  EXPECT_EQ(*ParseDevice("cpu:0"), Device::Cpu());
  const Device two{DeviceType::kCPU, 2};
  EXPECT_EQ(*ParseDevice("cpu:2"), two);
  EXPECT_EQ(two.ToString(), "cpu:2");
  EXPECT_TRUE(two.is_cpu());
  EXPECT_NE(two, Device::Cpu());
}

TEST(DeviceTest, RefusesAnythingElseNamingIt) {
  for (const char* bad : {"gpu", "cuda:", "cuda:-1", "cuda:x", "cuda:1x", "cuda:99999", "CPU", "", "cuda:0:1", "cpu:",
                          "cpu:x", "cpu:-1", "cpu:99999"}) {
    absl::StatusOr<Device> d = ParseDevice(bad);
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(d.status().message()), HasSubstr(absl::StrCat("'", bad, "'")));
    EXPECT_THAT(std::string(d.status().message()), HasSubstr("'cuda:N'"));
  }
}

TEST(BackendTest, TheCpuComesFirstAndEveryBackendRegistersKernels) {
  ASSERT_FALSE(Backends().empty());
  EXPECT_EQ(Backends().front()->type(), DeviceType::kCPU);
  for (const Backend* backend : Backends()) {
    EXPECT_FALSE(KernelRegistry::Global().OpTypes(backend->type()).empty()) << DeviceTypeName(backend->type());
  }
  absl::StatusOr<Backend*> cpu = BackendFor(Device::Cpu());
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ((*cpu)->allocator(Device::Cpu()).device(), Device::Cpu());
}

// Without a GPU (CI, the project's build machines) asking for one says what is missing; with
// one, the device is there. Either way nothing crashes.
TEST(BackendTest, AGpuThatIsNotThereIsAnErrorSayingWhatIsMissing) {
  absl::StatusOr<Backend*> cuda = BackendFor(Device::Cuda(0));
  if (cuda.ok()) GTEST_SKIP() << "this machine has a CUDA device: nothing is missing";
  EXPECT_EQ(cuda.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string message(cuda.status().message());
  EXPECT_THAT(message, HasSubstr("cuda:0"));
#ifdef PDIST_HAVE_CUDA
  // Built with CUDA: the runtime's own reason (no device, no driver).
  EXPECT_THAT(message, HasSubstr("cudaGetDeviceCount"));
#else
  EXPECT_THAT(message, HasSubstr("-DPDIST_WITH_CUDA=ON"));
#endif
}

TEST(BackendTest, TheExecutorRefusesADeviceItCannotRunAndNamesIt) {
  ir::Program p;
  ir::Builder b(&p);
  p.set_loss(*b.Op1("sum", {b.Data("x", {{4}, DataType::kFloat32})}));
  absl::StatusOr<Executor> on_gpu = Executor::Create(p, {.device = Device::Cuda(7)});
  if (on_gpu.ok()) GTEST_SKIP() << "this machine has 8 CUDA devices";
  EXPECT_EQ(on_gpu.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(on_gpu.status().message()), HasSubstr("cuda:7"));
}

TEST(BackendTest, ToDeviceOnTheSameDeviceSharesTheBuffer) {
  Tensor t = TensorFromDoubles({{3}, DataType::kFloat32}, {1, 2, 3});
  absl::StatusOr<Tensor> same = ToDevice(t, Device::Cpu());
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->buffer_id(), t.buffer_id());
}

// A host device (cpu:N) is the host's memory with its own allocator: moving a tensor there copies
// it, and the executor takes feeds and state only from its own device.
TEST(BackendTest, AHostDeviceKeepsItsTensorsApart) {
  const Device device{DeviceType::kCPU, 7};
  const Tensor host = TensorFromDoubles({{2}, DataType::kFloat32}, {1, 2});
  absl::StatusOr<Tensor> moved = ToDevice(host, device);
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(moved->device(), device);
  EXPECT_NE(moved->buffer_id(), host.buffer_id());
  EXPECT_EQ(TensorToDoubles(*moved), TensorToDoubles(host));
  EXPECT_EQ(HostAllocator::Of(device).device(), device);

  ir::Program p;
  ir::Builder b(&p);
  ir::Value* x = b.Data("x", {{2}, DataType::kFloat32});
  ir::Value* w = b.Parameter("w", {{2}, DataType::kFloat32}, "zeros");
  p.set_loss(*b.Op1("sum", {*b.Op1("add", {x, w})}));
  absl::StatusOr<Executor> executor = Executor::Create(p, {.device = device});
  ASSERT_TRUE(executor.ok()) << executor.status();
  Workspace state{{"w", *moved}};
  absl::StatusOr<RunResult> run = executor->Run({{"x", host}}, state);
  ASSERT_FALSE(run.ok());
  EXPECT_THAT(std::string(run.status().message()), HasSubstr("feed 'x' is on cpu, the program runs on cpu:7"));
  state = {{"w", host}};
  run = executor->Run({{"x", *moved}}, state);
  ASSERT_FALSE(run.ok());
  EXPECT_THAT(std::string(run.status().message()), HasSubstr("workspace tensor 'w' is on cpu, the program runs on cpu:7"));
  state = {{"w", *moved}};
  run = executor->Run({{"x", *moved}}, state);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->loss, 6);  // x + w = [1, 2] + [1, 2]
}

TEST(HostAllocatorTest, CountsTheBytesOfLiveTensorsAndTheirPeak) {
  HostAllocator& host = HostAllocator::Instance();
  const AllocatorStats before = host.stats();
  {
    Tensor a = Tensor::Empty({{1000}, DataType::kFloat64});  // 8,000 bytes
    Tensor view = a.Reshaped({10, 100});                      // the same buffer: nothing more
    EXPECT_EQ(a.device(), Device::Cpu());
    const AllocatorStats during = host.stats();
    EXPECT_EQ(during.in_use - before.in_use, 8000);
    EXPECT_EQ(during.allocations - before.allocations, 1);
    EXPECT_GE(during.peak_in_use, during.in_use);
  }
  EXPECT_EQ(host.stats().in_use, before.in_use);
}

TEST(HostAllocatorTest, AnAllocationTooLargeForTheMachineIsAnErrorNamingTheOp) {
  // 2^50 floats: 4 PiB, beyond a process's 47-bit address space, so no overcommit setting of
  // the kernel can grant it.
  ir::Program p;
  ir::Builder b(&p);
  ir::Value* big = *b.Op1("full", {}, {{"shape", ir::Shape{int64_t{1} << 50}}, {"value", 0.0}, {"dtype", DataType::kFloat32}});
  p.set_loss(*b.Op1("sum", {big}));
  absl::StatusOr<Executor> executor = Executor::Create(p);
  ASSERT_TRUE(executor.ok()) << executor.status();
  Workspace ws;
  absl::StatusOr<RunResult> run = executor->Run({}, ws);
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(run.status().message()), HasSubstr("full"));
  EXPECT_THAT(std::string(run.status().message()), HasSubstr("out of host memory allocating 4503599627370496 bytes"));
}

TEST(CpuStreamTest, WorkAfterWaitForRunsAfterTheEvent) {
  CpuWorkerStream first, second;
  std::atomic<int> order{0};
  int first_saw = -1, second_saw = -1;
  std::shared_ptr<Event> slow = first.Submit([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    first_saw = order.fetch_add(1);
    return absl::OkStatus();
  });
  ASSERT_TRUE(second.WaitFor(slow).ok());
  std::shared_ptr<Event> after = second.Submit([&] {
    second_saw = order.fetch_add(1);
    return absl::OkStatus();
  });
  ASSERT_TRUE(after->Wait().ok());
  EXPECT_EQ(first_saw, 0);
  EXPECT_EQ(second_saw, 1);
}

TEST(CpuStreamTest, TheInlineStreamReportsItsFirstFailureForLaterWork) {
  CpuInlineStream stream;
  bool ran = false;
  EXPECT_FALSE(stream.Submit([] { return absl::DataLossError("first"); })->Wait().ok());
  absl::Status later = stream.Submit([&] {
    ran = true;
    return absl::OkStatus();
  })->Wait();
  EXPECT_FALSE(ran);
  EXPECT_EQ(later.message(), "first");
  EXPECT_EQ(stream.Synchronize().message(), "first");
  // Waiting for another stream's failed event hands its status over.
  CpuWorkerStream worker;
  std::shared_ptr<Event> failed = worker.Submit([] { return absl::AbortedError("peer gone"); });
  EXPECT_EQ(CpuInlineStream().WaitFor(failed).message(), "peer gone");
}

TEST(CpuStreamTest, ATimeMarkIsWhenTheWorkerGotThereNotWhenItWasAsked) {
  CpuInlineStream compute;
  CpuWorkerStream worker;
  std::shared_ptr<TimeMark> anchor = compute.MarkTime();
  std::latch go(1);
  worker.Submit([&go] {
    go.wait();  // the worker is busy until the host has asked for the marks
    return absl::OkStatus();
  });
  std::shared_ptr<TimeMark> after_the_work = worker.MarkTime();  // returns at once
  std::shared_ptr<TimeMark> asked = compute.MarkTime();
  go.count_down();
  absl::StatusOr<double> asked_s = asked->SecondsSince(*anchor);
  absl::StatusOr<double> reached_s = after_the_work->SecondsSince(*anchor);
  ASSERT_TRUE(asked_s.ok() && reached_s.ok()) << asked_s.status() << reached_s.status();
  EXPECT_GT(*reached_s, *asked_s);  // stamped by the worker after the host had gone on
  ASSERT_TRUE(after_the_work->Wait().ok());
  absl::StatusOr<double> back = anchor->SecondsSince(*after_the_work);
  ASSERT_TRUE(back.ok());
  EXPECT_DOUBLE_EQ(*back, -*reached_s);
}

TEST(CpuStreamTest, AMarkAFailedStreamNeverReachedReportsTheFailure) {
  CpuWorkerStream worker;
  worker.Submit([] { return absl::AbortedError("peer gone"); });
  std::shared_ptr<TimeMark> mark = worker.MarkTime();
  absl::StatusOr<double> s = mark->SecondsSince(*CpuInlineStream().MarkTime());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(), "peer gone");
  EXPECT_EQ(mark->Wait().message(), "peer gone");
}

TEST(CpuStreamTest, MarksOfTwoClocksAreNotCompared) {
  struct OtherClock final : TimeMark {
    absl::StatusOr<double> SecondsSince(const TimeMark&) const override { return 0.0; }
    absl::Status Wait() const override { return absl::OkStatus(); }
  };
  absl::StatusOr<double> s = CpuInlineStream().MarkTime()->SecondsSince(OtherClock());
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("two clocks"));
}

}  // namespace
}  // namespace pdist::exec
