// Inproc communicator: every collective on 2, 3 and 4 thread-ranks, sub-groups, errors, timeouts.
#include "executor/comm/inproc/inproc_communicator.h"

#include <chrono>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/status.h"
#include "tests/comm/comm_test_util.h"

namespace pdist::exec::comm {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::Filled;
using testing::RunRanks;

// Rank r's input element i: distinct per rank and element, exact in f32.
double Value(int r, int64_t i) { return (r + 1) * 0.25 + i * 3.0 - r * i; }

class InprocTest : public ::testing::TestWithParam<int> {
 protected:
  int n() const { return GetParam(); }
  // Runs fn(comm) on every rank of a fresh world and expects every rank to succeed.
  void RunOk(const std::function<absl::Status(Communicator&)>& fn, CommConfig config = {}) {
    auto world = std::make_shared<InprocWorld>(n());
    auto status = RunRanks(n(), [&](int r) -> absl::Status {
      PDIST_ASSIGN_OR_RETURN(auto comm, CreateInprocCommunicator(world, r, config));
      return fn(*comm);
    });
    for (int r = 0; r < n(); ++r) EXPECT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
  }
};

TEST_P(InprocTest, AllReduceSumAvgMaxInAndOutOfPlace) {
  const int64_t count = 7;  // not a multiple of n: uneven internal pieces
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
    for (ir::DataType dtype : {ir::DataType::kFloat32, ir::DataType::kFloat64, ir::DataType::kInt64}) {
      if (op == ReduceOp::kAvg && dtype == ir::DataType::kInt64) continue;
      for (bool in_place : {false, true}) {
        RunOk([&](Communicator& c) -> absl::Status {
          Tensor x = Filled({count}, [&](int64_t i) { return std::floor(Value(c.rank(), i)); }, dtype);
          Tensor out = in_place ? x : Tensor::Zeros(x.type());
          PDIST_RETURN_IF_ERROR(c.AllReduce(x, out, op));
          for (int64_t i = 0; i < count; ++i) {
            double want = op == ReduceOp::kMax ? -1e300 : 0;
            for (int r = 0; r < c.size(); ++r) {
              const double v = std::floor(Value(r, i));
              want = op == ReduceOp::kMax ? std::max(want, v) : want + v;
            }
            if (op == ReduceOp::kAvg) want /= c.size();
            EXPECT_DOUBLE_EQ(out.At(i), want) << ReduceOpName(op) << " i=" << i;
          }
          return absl::OkStatus();
        });
      }
    }
  }
}

TEST_P(InprocTest, AllReduceIsBitwiseRankOrderAndEqualOnEveryRank) {
  const int64_t count = 1000;
  std::vector<Tensor> outs(n());
  RunOk([&](Communicator& c) -> absl::Status {
    // Values whose float sum depends on the order of additions.
    Tensor x = Filled({count}, [&](int64_t i) { return std::pow(10.0, (c.rank() * 7 + i) % 9 - 4) / 3; });
    outs[c.rank()] = Tensor::Zeros(x.type());
    return c.AllReduce(x, outs[c.rank()], ReduceOp::kSum);
  });
  for (int64_t i = 0; i < count; ++i) {
    float want = 0;
    for (int r = 0; r < n(); ++r) want += static_cast<float>(std::pow(10.0, (r * 7 + i) % 9 - 4) / 3);
    for (int r = 0; r < n(); ++r) ASSERT_EQ(outs[r].data<float>()[i], want) << "rank " << r << " i=" << i;
  }
}

TEST_P(InprocTest, AllGatherConcatenatesAlongDim0) {
  RunOk([&](Communicator& c) -> absl::Status {
    Tensor x = Filled({2, 3}, [&](int64_t i) { return Value(c.rank(), i); });
    Tensor out = Tensor::Zeros({{2 * c.size(), 3}, ir::DataType::kFloat32});
    PDIST_RETURN_IF_ERROR(c.AllGather(x, out));
    for (int r = 0; r < c.size(); ++r) {
      for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(out.At(r * 6 + i), Value(r, i));
    }
    return absl::OkStatus();
  });
}

TEST_P(InprocTest, ReduceScatterSumAndAvg) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
    RunOk([&](Communicator& c) -> absl::Status {
      const int64_t piece = 3;
      Tensor x = Filled({c.size() * piece}, [&](int64_t i) { return Value(c.rank(), i); }, ir::DataType::kFloat64);
      Tensor out = Tensor::Zeros({{piece}, ir::DataType::kFloat64});
      PDIST_RETURN_IF_ERROR(c.ReduceScatter(x, out, op));
      for (int64_t i = 0; i < piece; ++i) {
        double want = 0;
        for (int r = 0; r < c.size(); ++r) want += Value(r, c.rank() * piece + i);
        if (op == ReduceOp::kAvg) want /= c.size();
        EXPECT_DOUBLE_EQ(out.At(i), want);
      }
      return absl::OkStatus();
    });
  }
}

TEST_P(InprocTest, AllToAllExchangesPiecesInAndOutOfPlace) {
  for (bool in_place : {false, true}) {
    RunOk([&](Communicator& c) -> absl::Status {
      const int64_t piece = 2;
      Tensor x = Filled({c.size() * piece}, [&](int64_t i) { return Value(c.rank(), i); }, ir::DataType::kInt32);
      Tensor out = in_place ? x : Tensor::Zeros(x.type());
      PDIST_RETURN_IF_ERROR(c.AllToAll(x, out));
      for (int s = 0; s < c.size(); ++s) {
        for (int64_t j = 0; j < piece; ++j) {
          EXPECT_EQ(out.At(s * piece + j), static_cast<int32_t>(Value(s, c.rank() * piece + j)));
        }
      }
      return absl::OkStatus();
    });
  }
}

TEST_P(InprocTest, BroadcastFromLastRank) {
  RunOk([&](Communicator& c) -> absl::Status {
    const int root = c.size() - 1;
    Tensor x = Filled({5}, [&](int64_t i) { return Value(c.rank(), i); });
    PDIST_RETURN_IF_ERROR(c.Broadcast(x, root));
    for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(x.At(i), Value(root, i));
    return absl::OkStatus();
  });
}

TEST_P(InprocTest, SendRecvAroundARingTwice) {
  RunOk([&](Communicator& c) -> absl::Status {
    const int next = (c.rank() + 1) % c.size(), prev = (c.rank() + c.size() - 1) % c.size();
    for (int round = 0; round < 2; ++round) {
      Tensor x = Filled({4}, [&](int64_t i) { return Value(c.rank(), i) + round; });
      Tensor y = Tensor::Zeros(x.type());
      // Even ranks send first, odd ranks receive first: no deadlock with synchronous sends.
      if (c.rank() % 2 == 0) {
        PDIST_RETURN_IF_ERROR(c.Send(x, next));
        PDIST_RETURN_IF_ERROR(c.Recv(y, prev));
      } else {
        PDIST_RETURN_IF_ERROR(c.Recv(y, prev));
        PDIST_RETURN_IF_ERROR(c.Send(x, next));
      }
      for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(y.At(i), static_cast<float>(Value(prev, i) + round));
    }
    return c.Barrier();
  });
}

TEST_P(InprocTest, SplitMakesCachedSubgroups) {
  RunOk([&](Communicator& c) -> absl::Status {
    // Two "mesh axes" of a 1-D group: even/odd ranks.
    PDIST_ASSIGN_OR_RETURN(auto sub, c.Split(c.rank() % 2, c.rank()));
    PDIST_ASSIGN_OR_RETURN(auto again, c.Split(c.rank() % 2, c.rank()));
    EXPECT_EQ(sub.get(), again.get()) << "sub-groups are created once and cached";
    EXPECT_EQ(sub->rank(), c.rank() / 2);
    EXPECT_THAT(sub->name(), HasSubstr(c.rank() % 2 == 0 ? "world/{0" : "world/{1"));
    Tensor x = Tensor::Scalar(ir::DataType::kFloat64, c.rank());
    PDIST_RETURN_IF_ERROR(sub->AllReduce(x, x, ReduceOp::kSum));
    double want = 0;
    for (int r = c.rank() % 2; r < c.size(); r += 2) want += r;
    EXPECT_EQ(x.At(0), want);
    // Reversed key order reverses sub-group ranks.
    PDIST_ASSIGN_OR_RETURN(auto rev, c.Split(0, -c.rank()));
    EXPECT_EQ(rev->rank(), c.size() - 1 - c.rank());
    return absl::OkStatus();
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, InprocTest, ::testing::Values(2, 3, 4),
                         [](const auto& info) { return absl::StrCat("n", info.param); });

TEST(InprocErrorsTest, FingerprintMismatchNamesBothCalls) {
  auto world = std::make_shared<InprocWorld>(2);
  auto status = RunRanks(2, [&](int r) -> absl::Status {
    PDIST_ASSIGN_OR_RETURN(auto c, CreateInprocCommunicator(world, r));
    Tensor x = Tensor::Zeros({{4}, ir::DataType::kFloat32});
    Tensor big = Tensor::Zeros({{8}, ir::DataType::kFloat32});
    return r == 0 ? c->AllReduce(x, x, ReduceOp::kSum) : c->AllGather(x, big);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(status[r].code(), absl::StatusCode::kInternal) << status[r];
    EXPECT_THAT(status[r].message(), AllOf(HasSubstr("all_reduce(sum) f32 x4 in world#0"),
                                           HasSubstr("all_gather f32 x4 in world#0"), HasSubstr("mismatch")));
  }
}

// A barrier with its own deadline (a checkpoint's: the slowest rank's files) waits past the
// communicator's; the plain one does not.
TEST(InprocErrorsTest, ABarriersOwnDeadlineOutlastsTheCommunicators) {
  for (bool own : {true, false}) {
    auto world = std::make_shared<InprocWorld>(2);
    CommConfig config;
    config.timeout = absl::Milliseconds(200);
    auto status = RunRanks(2, [&](int r) -> absl::Status {
      PDIST_ASSIGN_OR_RETURN(auto c, CreateInprocCommunicator(world, r, config));
      if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(600));  // writing its files
      return own ? c->Barrier(absl::Seconds(10)) : c->Barrier();
    });
    if (own) {
      EXPECT_TRUE(status[0].ok()) << status[0];
      EXPECT_TRUE(status[1].ok()) << status[1];
    } else {
      EXPECT_EQ(status[0].code(), absl::StatusCode::kDeadlineExceeded) << status[0];
    }
  }
}

TEST(InprocErrorsTest, MissingRankTimesOutNamingItAndPoisonsTheCommunicator) {
  auto world = std::make_shared<InprocWorld>(3);
  CommConfig config;
  config.timeout = absl::Milliseconds(500);
  const auto start = std::chrono::steady_clock::now();
  auto status = RunRanks(3, [&](int r) -> absl::Status {
    PDIST_ASSIGN_OR_RETURN(auto c, CreateInprocCommunicator(world, r, config));
    Tensor x = Tensor::Zeros({{4}, ir::DataType::kFloat32});
    PDIST_RETURN_IF_ERROR(c->AllReduce(x, x, ReduceOp::kSum));  // seq 0: everyone
    if (r == 2) return absl::OkStatus();                          // rank 2 never calls seq 1
    absl::Status s = c->AllReduce(x, x, ReduceOp::kMax);
    EXPECT_EQ(c->AsyncError().code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_EQ(c->Barrier().code(), absl::StatusCode::kDeadlineExceeded) << "sticky error";
    return s;
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 3.0);
  EXPECT_TRUE(status[2].ok());
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(status[r].code(), absl::StatusCode::kDeadlineExceeded) << status[r];
    EXPECT_THAT(status[r].message(),
                AllOf(HasSubstr("group 'world'"), HasSubstr("all_reduce(max)"), HasSubstr("seq 1"),
                      HasSubstr("ranks that did not arrive: 2")));
  }
}

TEST(InprocErrorsTest, AbortWakesWaitingRanks) {
  auto world = std::make_shared<InprocWorld>(2);
  auto c0 = CreateInprocCommunicator(world, 0).value();
  auto c1 = CreateInprocCommunicator(world, 1).value();
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    c1->Abort();
  });
  Tensor x = Tensor::Zeros({{4}, ir::DataType::kFloat32});
  absl::Status s = c0->AllReduce(x, x, ReduceOp::kSum);
  aborter.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_EQ(c1->AsyncError().code(), absl::StatusCode::kAborted);
}

TEST(InprocErrorsTest, BadArgumentsAreRejectedBeforeAnyRankWaits) {
  auto world = std::make_shared<InprocWorld>(2);
  auto c = CreateInprocCommunicator(world, 0).value();
  Tensor x = Tensor::Zeros({{4}, ir::DataType::kFloat32});
  Tensor y = Tensor::Zeros({{5}, ir::DataType::kFloat32});
  Tensor i = Tensor::Zeros({{4}, ir::DataType::kInt32});
  EXPECT_EQ(c->AllGather(x, y).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c->AllReduce(x, i, ReduceOp::kSum).message(), HasSubstr("group 'world'"));
  EXPECT_EQ(c->AllReduce(i, i, ReduceOp::kAvg).code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(c->Send(x, 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c->Broadcast(x, 7).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(c->AsyncError().ok()) << "argument errors do not poison the communicator";
  EXPECT_EQ(CreateInprocCommunicator(world, 2).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pdist::exec::comm
