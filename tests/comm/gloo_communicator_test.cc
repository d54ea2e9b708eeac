// Gloo communicator: collectives on thread-ranks over a FileStore, errors, a killed process.
#include "executor/comm/gloo/gloo_communicator.h"

#include <signal.h>
#include <stdlib.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/status.h"
#include "executor/comm/progress_board.h"
#include "tests/comm/comm_test_util.h"

namespace pdist::exec::comm {
namespace {

#ifdef PDIST_HAVE_GLOO

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::Filled;
using testing::RunRanks;

double Value(int r, int64_t i) { return (r + 1) * 0.5 + i * 2.0 - r * i; }

class GlooTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/pdist-gloo-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = rendezvous_.file_store_dir = dir;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Connects `n` thread-ranks and runs fn on each; returns each rank's status.
  std::vector<absl::Status> Run(int n, const std::function<absl::Status(Communicator&)>& fn,
                                absl::Duration timeout = absl::Seconds(20)) {
    CommConfig config;
    config.timeout = timeout;
    return RunRanks(n, [&](int r) -> absl::Status {
      PDIST_ASSIGN_OR_RETURN(auto comm, CreateGlooCommunicator(rendezvous_, r, n, config));
      return fn(*comm);
    });
  }
  void RunOk(int n, const std::function<absl::Status(Communicator&)>& fn) {
    auto status = Run(n, fn);
    for (int r = 0; r < n; ++r) EXPECT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
  }

  GlooRendezvous rendezvous_;
  std::string dir_;  // removed after the test even if a test stops using it
};

TEST_F(GlooTest, EveryCollectiveOn2And3And4Ranks) {
  for (int n : {2, 3, 4}) {
    SCOPED_TRACE(n);
    rendezvous_.prefix = absl::StrCat("n", n);
    RunOk(n, [&](Communicator& c) -> absl::Status {
      const int r = c.rank();
      // all_reduce: sum / avg / max in place (f32), sum out of place (i64).
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
        Tensor x = Filled({5}, [&](int64_t i) { return Value(r, i); });
        PDIST_RETURN_IF_ERROR(c.AllReduce(x, x, op));
        for (int64_t i = 0; i < 5; ++i) {
          double want = op == ReduceOp::kMax ? -1e300 : 0;
          for (int s = 0; s < n; ++s) want = op == ReduceOp::kMax ? std::max(want, Value(s, i)) : want + Value(s, i);
          if (op == ReduceOp::kAvg) want /= n;
          EXPECT_FLOAT_EQ(x.At(i), want) << ReduceOpName(op);
        }
      }
      Tensor xi = Filled({3}, [&](int64_t i) { return r * 10 + i; }, ir::DataType::kInt64);
      Tensor yi = Tensor::Zeros(xi.type());
      PDIST_RETURN_IF_ERROR(c.AllReduce(xi, yi, ReduceOp::kSum));
      EXPECT_EQ(yi.At(2), 10 * n * (n - 1) / 2 + 2 * n);
      // all_gather
      Tensor g = Tensor::Zeros({{2 * n}, ir::DataType::kFloat64});
      PDIST_RETURN_IF_ERROR(c.AllGather(Filled({2}, [&](int64_t i) { return Value(r, i); }, ir::DataType::kFloat64), g));
      for (int s = 0; s < n; ++s) EXPECT_EQ(g.At(2 * s + 1), Value(s, 1));
      // reduce_scatter (sum)
      Tensor rs_in = Filled({3 * n}, [&](int64_t i) { return Value(r, i); }, ir::DataType::kFloat64);
      Tensor rs = Tensor::Zeros({{3}, ir::DataType::kFloat64});
      PDIST_RETURN_IF_ERROR(c.ReduceScatter(rs_in, rs, ReduceOp::kSum));
      for (int64_t i = 0; i < 3; ++i) {
        double want = 0;
        for (int s = 0; s < n; ++s) want += Value(s, r * 3 + i);
        EXPECT_DOUBLE_EQ(rs.At(i), want);
      }
      // all_to_all in place
      Tensor a = Filled({2 * n}, [&](int64_t i) { return Value(r, i); });
      PDIST_RETURN_IF_ERROR(c.AllToAll(a, a));
      for (int s = 0; s < n; ++s) EXPECT_FLOAT_EQ(a.At(2 * s + 1), Value(s, 2 * r + 1));
      // broadcast from the last rank
      Tensor b = Filled({4}, [&](int64_t i) { return Value(r, i); });
      PDIST_RETURN_IF_ERROR(c.Broadcast(b, n - 1));
      EXPECT_FLOAT_EQ(b.At(3), Value(n - 1, 3));
      // send / recv: rank 0 → every other rank
      Tensor p = Filled({3}, [&](int64_t i) { return Value(r, i); });
      if (r == 0) {
        for (int s = 1; s < n; ++s) PDIST_RETURN_IF_ERROR(c.Send(p, s));
      } else {
        PDIST_RETURN_IF_ERROR(c.Recv(p, 0));
        EXPECT_FLOAT_EQ(p.At(2), Value(0, 2));
      }
      return c.Barrier();
    });
  }
}

TEST_F(GlooTest, SplitIntoCachedSubgroups) {
  RunOk(4, [&](Communicator& c) -> absl::Status {
    PDIST_ASSIGN_OR_RETURN(auto sub, c.Split(c.rank() / 2, c.rank()));
    PDIST_ASSIGN_OR_RETURN(auto again, c.Split(c.rank() / 2, c.rank()));
    EXPECT_EQ(sub.get(), again.get());
    EXPECT_EQ(sub->size(), 2);
    Tensor x = Tensor::Scalar(ir::DataType::kFloat32, c.rank());
    PDIST_RETURN_IF_ERROR(sub->AllReduce(x, x, ReduceOp::kSum));
    EXPECT_EQ(x.At(0), c.rank() < 2 ? 1 : 5);
    return absl::OkStatus();
  });
}

TEST_F(GlooTest, FingerprintMismatchNamesBothCalls) {
  auto status = Run(2, [&](Communicator& c) -> absl::Status {
    Tensor x = Tensor::Zeros({{4}, ir::DataType::kFloat32});
    return c.rank() == 0 ? c.AllReduce(x, x, ReduceOp::kSum) : c.AllReduce(x, x, ReduceOp::kMax);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(status[r].code(), absl::StatusCode::kInternal) << status[r];
    EXPECT_THAT(status[r].message(), AllOf(HasSubstr("all_reduce(sum) f32 x4"), HasSubstr("all_reduce(max) f32 x4")));
  }
}

TEST_F(GlooTest, RankThatNeverCallsTimesOutNamingIt) {
  std::atomic<int> finished{0};
  const auto start = std::chrono::steady_clock::now();
  auto status = Run(3, [&](Communicator& c) -> absl::Status {
    if (c.rank() == 2) {  // connected, alive, but never joins the collective
      while (finished < 2) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      return absl::OkStatus();
    }
    Tensor x = Tensor::Zeros({{4}, ir::DataType::kFloat32});
    absl::Status s = c.AllReduce(x, x, ReduceOp::kSum);
    ++finished;
    return s;
  }, absl::Seconds(1));
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 8.0);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(status[r].code(), absl::StatusCode::kDeadlineExceeded) << status[r];
    EXPECT_THAT(status[r].message(), AllOf(HasSubstr("group 'world'"), HasSubstr("all_reduce(sum)"),
                                           HasSubstr("seq 0"), HasSubstr("did not arrive: 2")));
  }
}

TEST_F(GlooTest, RankThatNeverStartsTimesOutAtConnect) {
  CommConfig config;
  config.timeout = absl::Milliseconds(500);
  auto status = RunRanks(2, [&](int r) { return CreateGlooCommunicator(rendezvous_, r, 3, config).status(); });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(status[r].code(), absl::StatusCode::kDeadlineExceeded) << status[r];
    EXPECT_THAT(status[r].message(), HasSubstr("did not arrive: 2"));
  }
}

TEST_F(GlooTest, EnvironmentRendezvousNeedsADirectoryOrAMasterPort) {
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "1", 1);
  unsetenv("PDIST_RENDEZVOUS_DIR");
  unsetenv("MASTER_PORT");
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  auto missing = CreateGlooCommunicatorFromEnv();
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(missing.status().message(), HasSubstr("MASTER_PORT"));
  setenv("PDIST_RENDEZVOUS_DIR", rendezvous_.file_store_dir.c_str(), 1);
  auto comm = CreateGlooCommunicatorFromEnv();
  ASSERT_TRUE(comm.ok()) << comm.status();
  EXPECT_EQ((*comm)->size(), 1);
  for (const char* v : {"RANK", "WORLD_SIZE", "PDIST_RENDEZVOUS_DIR", "MASTER_ADDR"}) unsetenv(v);
}

// A free TCP port on loopback (bind to 0, read it back, release it).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

TEST_F(GlooTest, TcpStoreRendezvousAtMasterAddrAndPort) {
  rendezvous_.file_store_dir.clear();
  rendezvous_.master_addr = "127.0.0.1";
  rendezvous_.master_port = FreePort();
  RunOk(3, [&](Communicator& c) -> absl::Status {
    PDIST_ASSIGN_OR_RETURN(auto sub, c.Split(c.rank() == 1, c.rank()));  // sub-groups via the store too
    Tensor x = Tensor::Scalar(ir::DataType::kFloat64, c.rank() + 1);
    PDIST_RETURN_IF_ERROR(c.AllReduce(x, x, ReduceOp::kSum));
    EXPECT_EQ(x.At(0), 6);
    PDIST_RETURN_IF_ERROR(sub->AllReduce(x, x, ReduceOp::kSum));
    EXPECT_EQ(x.At(0), c.rank() == 1 ? 6 : 12);
    return c.Barrier();  // rank 0 serves the store: nobody leaves before everyone is done
  });
}

// The rendezvous store as a KeyValueStore (what the NCCL backend meets through), over a shared
// directory and over rank 0's TCP store: values cross ranks, a key is replaced when set again,
// a key nobody sets is named after its timeout, and a progress board diagnoses through it.
TEST_F(GlooTest, TheRendezvousStoreServesKeysAndTheProgressBoard) {
  for (bool tcp : {false, true}) {
    GlooRendezvous where = rendezvous_;
    if (tcp) {
      where.file_store_dir.clear();
      where.master_addr = "127.0.0.1";
      where.master_port = FreePort();
    }
    absl::StatusOr<std::shared_ptr<KeyValueStore>> server = OpenKeyValueStore(where, 0, absl::Seconds(10));
    ASSERT_TRUE(server.ok()) << server.status();
    absl::StatusOr<std::shared_ptr<KeyValueStore>> client = OpenKeyValueStore(where, 1, absl::Seconds(10));
    ASSERT_TRUE(client.ok()) << client.status();
    ASSERT_TRUE((*server)->Set("nccl/world/id", std::string("\0id\xff", 4)).ok());
    absl::StatusOr<std::string> id = (*client)->Get("nccl/world/id", absl::Seconds(5));
    ASSERT_TRUE(id.ok()) << id.status();
    EXPECT_EQ(*id, std::string("\0id\xff", 4));
    absl::StatusOr<std::optional<std::string>> absent = (*client)->TryGet("nccl/tp/id");
    ASSERT_TRUE(absent.ok()) << absent.status();
    EXPECT_FALSE(absent->has_value());
    absl::StatusOr<std::string> late = (*client)->Get("nccl/tp/id", absl::Milliseconds(50));
    EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_THAT(std::string(late.status().message()), ::testing::HasSubstr("'nccl/tp/id'"));

    Fingerprint fp;
    fp.kind = CollectiveKind::kAllGather;
    fp.group = "world";
    fp.seq = 4;
    ProgressBoard zero(*server, "world", 0, 2), one(*client, "world", 1, 2);
    for (int64_t seq : {2, 3}) {  // a board posts its key again and again
      fp.seq = seq;
      ASSERT_TRUE(one.Post(fp).ok()) << "post of seq " << seq << (tcp ? " (tcp)" : " (directory)");
    }
    fp.seq = 4;
    EXPECT_THAT(std::string(zero.Diagnose(fp, absl::Seconds(1)).message()),
                ::testing::HasSubstr("ranks that did not arrive: 1 (rank 1 last started all_gather f32 x0 in world#3)"));
  }
}

// Real processes, rendezvous from the environment: rank 2 is SIGKILLed after connecting;
// ranks 0 and 1 must fail their all_reduce (not hang) and name rank 2.
TEST_F(GlooTest, KilledProcessMakesTheOthersFailInBoundedTime) {
  const int n = 3;
  std::vector<pid_t> pids;
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < n; ++r) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      setenv("RANK", std::to_string(r).c_str(), 1);
      setenv("WORLD_SIZE", std::to_string(n).c_str(), 1);
      setenv("PDIST_RENDEZVOUS_DIR", rendezvous_.file_store_dir.c_str(), 1);
      CommConfig config;
      config.timeout = absl::Seconds(3);  // a dead peer is seen at once; this bounds the rest
      auto comm = CreateGlooCommunicatorFromEnv(config);
      if (!comm.ok()) _exit(10);
      Tensor x = Tensor::Zeros({{1024}, ir::DataType::kFloat32});
      if (!(*comm)->AllReduce(x, x, ReduceOp::kSum).ok()) _exit(11);  // everyone alive: works
      if (r == 2) {
        // Die while the others wait in the next all_reduce (dying at once could reset the
        // connections before the others read the last bytes of this one).
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        raise(SIGKILL);
      }
      absl::Status s = (*comm)->AllReduce(x, x, ReduceOp::kSum);
      // A closed connection (Unavailable) or, if the close was not seen, a timeout — naming rank 2.
      const bool named = (absl::StrContains(s.message(), "closed it (exited, crashed, or stopped after an error of their own: see their output): 2") ||
                          absl::StrContains(s.message(), "did not arrive: 2"));
      fprintf(stderr, "rank %d: %s\n", r, s.ToString().c_str());
      _exit(!s.ok() && named ? 0 : 12);
    }
    pids.push_back(pid);
  }
  for (int r = 0; r < n; ++r) {
    int wstatus = 0;
    ASSERT_EQ(waitpid(pids[r], &wstatus, 0), pids[r]);
    if (r == 2) {
      EXPECT_TRUE(WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL);
    } else {
      EXPECT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) << "rank " << r << " status " << wstatus;
    }
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 12.0);
}

#else

TEST(GlooTest, NotBuilt) {
  GTEST_SKIP() << "gloo backend not built (libgloo-dev not found or -DPDIST_WITH_GLOO=OFF)";
}

#endif

}  // namespace
}  // namespace pdist::exec::comm
