// Training with ranks as processes over Gloo (pdist-run + pdist-train --backend gloo) equals the
// single-rank run: dp2 and dp2×mp2, 10 AdamW steps, float32 (1e-5) and float64 (1e-10), losses
// from --losses-out and every parameter from the --save checkpoints (which hold whole tensors).
// And a rank killed mid-run ends the others with an error in bounded time.
#ifdef PDIST_HAVE_GLOO

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "engine/checkpoint.h"
#include "ir/serialize.h"
#include "tests/engine/distributed_test_util.h"
#include "tests/testing/temp_path.h"
#include "tools/launcher.h"
#include "tools/rank_spawn.h"

namespace pdist::tools {
namespace {

constexpr int64_t kHeads = 4;

class GlooTrainingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = pdist::testing::UniqueTempPath("gloo_training");
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  std::string ExportModel(const std::string& dtype) {
    const std::string model = Path("model_" + dtype + ".pb");
    const std::string cmd = std::string(PDIST_EXPORT_BIN) +
                            " gpt --layers 2 --hidden 32 --heads 4 --vocab 256 --seq 8 --batch 4 --dtype " + dtype +
                            " -o " + model + " 2>/dev/null";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    return model;
  }

  std::vector<std::string> TrainArgs(const std::string& model, const std::string& tag) {
    return {PDIST_TRAIN_BIN, model, "--data", std::string(PDIST_SOURCE_DIR) + "/data/essay.txt", "--steps", "10",
            "--lr", "1e-3", "--seed", "7", "--quiet", "--losses-out", Path(tag + ".json"), "--save", Path(tag + ".ckpt")};
  }

  void Strategy(const std::string& name, const std::string& json) { std::ofstream(Path(name)) << json; }

  std::vector<double> Losses(const std::string& tag) {
    std::ifstream in(Path(tag + ".json"));
    nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    std::vector<double> out;
    if (j.is_object() && j.contains("losses")) {
      for (const auto& v : j["losses"]) out.push_back(v.get<double>());
    }
    return out;
  }

  engine::testing::RunOutcome Outcome(const std::string& tag) {
    engine::testing::RunOutcome out;
    out.losses = Losses(tag);
    auto ckpt = engine::LoadCheckpoint(Path(tag + ".ckpt"));
    EXPECT_TRUE(ckpt.ok()) << ckpt.status();
    if (ckpt.ok()) out.state = std::move(ckpt->tensors);
    return out;
  }

  void CompareWithSingleRank(const std::string& dtype, int nprocs, const std::string& strategy_json) {
    const std::string model = ExportModel(dtype);
    std::string single;
    for (const std::string& a : TrainArgs(model, "single")) single += a + " ";
    ASSERT_EQ(std::system((single + " 2>/dev/null").c_str()), 0) << single;

    Strategy("s.json", strategy_json);
    LaunchOptions o;
    o.nprocs = nprocs;
    o.command = TrainArgs(model, "gloo");
    for (const char* a : {"--strategy", "", "--backend", "gloo", "--collective-timeout-s", "60"}) o.command.push_back(a);
    o.command[o.command.size() - 5] = Path("s.json");
    o.stdout_fd = o.stderr_fd = ::open(Path("launch.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    o.timeout = absl::Seconds(120);
    absl::StatusOr<LaunchResult> r = Launch(o);
    ::close(o.stdout_fd);
    ASSERT_TRUE(r.ok()) << r.status();
    std::ifstream log(Path("launch.log"));
    ASSERT_EQ(r->exit_code, 0) << std::string(std::istreambuf_iterator<char>(log), {});

    auto program = ir::LoadProgramAuto(model);
    ASSERT_TRUE(program.ok()) << program.status();
    const bool f64 = dtype == "f64";
    engine::testing::ExpectSameTraining(Outcome("gloo"), Outcome("single"), *program, f64 ? 1e-10 : 1e-5,
                                        f64 ? engine::testing::ElementMask{}
                                            : engine::testing::KeyBiasElements(*program, kHeads));
  }

  std::string dir_;
};

TEST_F(GlooTrainingTest, DataParallelTwoProcessesF32) { CompareWithSingleRank("f32", 2, R"({"dp_degree": 2})"); }
TEST_F(GlooTrainingTest, DataParallelTwoProcessesF64) { CompareWithSingleRank("f64", 2, R"({"dp_degree": 2})"); }
TEST_F(GlooTrainingTest, DataAndTensorParallelFourProcessesF32) {
  CompareWithSingleRank("f32", 4, R"({"dp_degree": 2, "mp_degree": 2})");
}
TEST_F(GlooTrainingTest, DataAndTensorParallelFourProcessesF64) {
  CompareWithSingleRank("f64", 4, R"({"dp_degree": 2, "mp_degree": 2})");
}
// ZeRO-3 with selective recompute as four processes: bucketed gradient reduce-scatters and
// parameter gathers over Gloo, and a sharded checkpoint each process writes its own pieces of
// (read back whole for the comparison).
TEST_F(GlooTrainingTest, ZeroThreeWithRecomputeFourProcessesF64) {
  CompareWithSingleRank("f64", 4, R"({"dp_degree": 2, "mp_degree": 2, "sharding": {"enable": true, "stage": 3},
                                      "recompute": {"enable": true, "granularity": "selective"}})");
}

// Two pipeline stages as two processes: stage 0 cannot hold the other stage's tensors, so the
// checkpoint (which the comparison reads) also proves they reach rank 0.
constexpr char kTwoStages[] = R"({"pp_degree": 2, "pipeline": {"schedule_mode": "1F1B", "accumulate_steps": 4}})";
TEST_F(GlooTrainingTest, TwoPipelineStagesTwoProcessesF32) { CompareWithSingleRank("f32", 2, kTwoStages); }
TEST_F(GlooTrainingTest, TwoPipelineStagesTwoProcessesF64) { CompareWithSingleRank("f64", 2, kTwoStages); }
// Each stage's two replicas start their gradient all-reduce inside the last micro-batch's
// backward, on the same communication stream as the stage-to-stage sends.
TEST_F(GlooTrainingTest, TwoPipelineStagesTimesTwoReplicasFourProcessesF64) {
  CompareWithSingleRank(
      "f64", 4, R"({"dp_degree": 2, "pp_degree": 2, "pipeline": {"schedule_mode": "1F1B", "accumulate_steps": 2}})");
}

// Two "nodes" on this machine, each a pdist-run of two ranks, form one job of four (dp2 × mp2):
// the launchers agree on the port and node ranks as on two hosts, and the job trains like one rank.
class TwoNodesTest : public GlooTrainingTest {
 protected:
  // The command line of node `node`'s launcher, its output to node<k>.log.
  std::string NodeCommand(int node, int port, const std::vector<std::string>& train) {
    std::string cmd = absl::StrCat(PDIST_RUN_BIN, " --nnodes 2 --node-rank ", node, " --nprocs 2 --master-port ", port,
                                   " --timeout-s 120 --");
    for (const std::string& a : train) cmd += " " + a;
    return cmd + " > " + Path(absl::StrCat("node", node, ".log")) + " 2>&1";
  }
  std::string Log(int node) {
    std::ifstream log(Path(absl::StrCat("node", node, ".log")));
    return std::string(std::istreambuf_iterator<char>(log), {});
  }
};

TEST_F(TwoNodesTest, TwoLaunchersOfTwoRanksTrainLikeOneRankF64) {
  const std::string model = ExportModel("f64");
  std::string single;
  for (const std::string& a : TrainArgs(model, "single")) single += a + " ";
  ASSERT_EQ(std::system((single + " 2>/dev/null").c_str()), 0) << single;
  Strategy("s.json", R"({"dp_degree": 2, "mp_degree": 2})");
  std::vector<std::string> train = TrainArgs(model, "gloo");
  for (const char* a : {"--strategy", "", "--collective-timeout-s", "60"}) train.push_back(a);
  train[train.size() - 3] = Path("s.json");
  absl::StatusOr<int> port = PickFreePort();
  ASSERT_TRUE(port.ok()) << port.status();
  int node1 = -1;
  std::thread other([&] { node1 = std::system(NodeCommand(1, *port, train).c_str()); });
  const int node0 = std::system(NodeCommand(0, *port, train).c_str());
  other.join();
  ASSERT_EQ(node0, 0) << Log(0);
  ASSERT_EQ(node1, 0) << Log(1);

  auto program = ir::LoadProgramAuto(model);
  ASSERT_TRUE(program.ok()) << program.status();
  engine::testing::ExpectSameTraining(Outcome("gloo"), Outcome("single"), *program, 1e-10, {});
}

// Node 1's launcher is killed: its ranks get SIGTERM (PR_SET_PDEATHSIG), and every rank of both
// nodes stops after the same step (the per-step agreement on signals), long before the
// collective timeout. (Ranks whose peer dies outright fail in their next collective: Survivor,
// below.)
TEST_F(TwoNodesTest, KilledNodeEndsTheOtherNodesRanks) {
  const std::string model = ExportModel("f32");
  Strategy("dp4.json", R"({"dp_degree": 4})");
  // Each rank writes its trace after every step: once ranks 0 and 2 have, both nodes train.
  const std::string traces = Path("traces");
  const std::vector<std::string> train = {PDIST_TRAIN_BIN, model, "--data",
                                          std::string(PDIST_SOURCE_DIR) + "/data/essay.txt", "--steps", "1000000",
                                          "--quiet", "--strategy", Path("dp4.json"), "--collective-timeout-s", "60",
                                          "--timeline", traces};
  absl::StatusOr<int> port = PickFreePort();
  ASSERT_TRUE(port.ok()) << port.status();
  const std::string node1 = NodeCommand(1, *port, train);
  pid_t launcher1 = -1;
  {
    const std::vector<std::string> argv = {"/bin/sh", "-c", "exec " + node1};
    std::vector<char*> c;
    for (const std::string& a : argv) c.push_back(const_cast<char*>(a.c_str()));
    c.push_back(nullptr);
    launcher1 = ::fork();
    if (launcher1 == 0) {
      ::execv("/bin/sh", c.data());
      std::_Exit(127);
    }
  }
  ASSERT_GT(launcher1, 0);
  std::chrono::steady_clock::time_point killed;
  std::thread killer([&] {
    for (int i = 0; i < 600 && !(std::filesystem::exists(traces + "/rank0.trace.json") &&
                                 std::filesystem::exists(traces + "/rank2.trace.json"));
         ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    killed = std::chrono::steady_clock::now();
    ::kill(launcher1, SIGKILL);
  });
  const int node0 = std::system(NodeCommand(0, *port, train).c_str());
  killer.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  ::waitpid(launcher1, nullptr, 0);
  EXPECT_NE(node0, 0) << Log(0);
  EXPECT_LT(seconds, 30.0) << Log(0);  // from the kill; the collective timeout is 60 s
  const std::string log = Log(0);
  EXPECT_TRUE(log.find("[rank 0] pdist-train: terminated after step") != std::string::npos) << log;
  std::fprintf(stderr, "node 0 ended %.1f s after node 1's launcher was killed:\n%s", seconds, log.c_str());
}

// Two ranks started without the launcher (which would stop the survivor itself); rank 1 is
// then killed (SIGKILL: its sockets close) or frozen (SIGSTOP: it holds them open and says
// nothing). Either way rank 0 must fail on its own, with an error, in bounded time: at once
// for a closed connection, after the collective timeout for a silent peer.
struct Survivor {
  double seconds = 0;  // from the signal to rank 0's exit
  int status = 0;
  std::string log;
};

class GlooFailureTest : public GlooTrainingTest {
 protected:
  Survivor SignalRankOne(int signal, int timeout_s, const std::string& strategy_json = R"({"dp_degree": 2})") {
    Survivor out;
    const std::string model = ExportModel("f32");
    Strategy("dp2.json", strategy_json);
    LaunchOptions o;
    o.nprocs = 2;
    // Not --quiet: rank 0's progress line says when a step has run, i.e. both ranks are connected.
    o.command = {PDIST_TRAIN_BIN, model, "--data", std::string(PDIST_SOURCE_DIR) + "/data/essay.txt", "--steps",
                 "1000000", "--strategy", Path("dp2.json"), "--backend", "gloo",
                 "--collective-timeout-s", std::to_string(timeout_s)};
    absl::StatusOr<int> port = PickFreePort();
    EXPECT_TRUE(port.ok()) << port.status();
    std::vector<pid_t> pids;
    for (int rank = 0; rank < 2; ++rank) {
      const int fd = ::open(Path("rank" + std::to_string(rank) + ".log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      absl::StatusOr<pid_t> pid = SpawnRank(o, *port, rank, fd, ::dup(fd));
      EXPECT_TRUE(pid.ok()) << pid.status();
      if (!pid.ok()) return out;
      pids.push_back(*pid);
    }
    // Signal rank 1 once both train: a rank killed before it has connected is a rendezvous that
    // waits out the timeout (it cannot tell slow from dead), which a loaded machine made happen
    // with a fixed 3 s wait (the test failed at 33 s under ctest -j3).
    const auto launched = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - launched < std::chrono::seconds(60)) {
      std::ifstream progress(Path("rank0.log"));
      const std::string text(std::istreambuf_iterator<char>(progress), {});
      if (text.find(" loss ") != std::string::npos) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_EQ(::kill(pids[1], signal), 0);
    const auto start = std::chrono::steady_clock::now();
    pid_t done = 0;
    while ((done = ::waitpid(pids[0], &out.status, WNOHANG)) == 0 &&
           std::chrono::steady_clock::now() - start < std::chrono::seconds(timeout_s + 30)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (pid_t pid : pids) ::kill(-pid, SIGKILL);
    for (pid_t pid : pids) ::waitpid(pid, nullptr, 0);
    std::ifstream log(Path("rank0.log"));
    out.log.assign(std::istreambuf_iterator<char>(log), {});
    EXPECT_EQ(done, pids[0]) << "rank 0 still running " << out.seconds << " s after rank 1 got signal " << signal;
    EXPECT_TRUE(WIFEXITED(out.status) && WEXITSTATUS(out.status) != 0) << out.log;
    std::fprintf(stderr, "rank 0 ended %.2f s after rank 1 got signal %d:\n%s", out.seconds, signal, out.log.c_str());
    return out;
  }
};

TEST_F(GlooFailureTest, KilledRankEndsTheOtherAtOnce) {
  const Survivor s = SignalRankOne(SIGKILL, 30);
  EXPECT_LT(s.seconds, 10.0) << s.log;
  // Lost at the handshake (naming the rank) or mid-transfer (Gloo names the connection).
  EXPECT_TRUE(s.log.find("ranks that closed it (exited, crashed, or stopped after an error of their own: see their output): 1") != std::string::npos ||
              s.log.find("a peer exited, crashed or stopped after an error of its own mid-collective") != std::string::npos)
      << s.log;
}

// The second pipeline stage dies mid-schedule: the first, waiting for a gradient or sending an
// activation, ends at once too.
TEST_F(GlooFailureTest, KilledPipelineStageEndsTheOtherAtOnce) {
  const Survivor s = SignalRankOne(SIGKILL, 30, kTwoStages);
  EXPECT_LT(s.seconds, 10.0) << s.log;
  EXPECT_TRUE(s.log.find("ranks that closed it (exited, crashed, or stopped after an error of their own: see their output): 1") != std::string::npos ||
              s.log.find("a peer exited, crashed or stopped after an error of its own mid-collective") != std::string::npos)
      << s.log;
}

TEST_F(GlooFailureTest, FrozenRankEndsTheOtherWithTheTimeoutError) {
  const Survivor s = SignalRankOne(SIGSTOP, 3);
  EXPECT_GE(s.seconds, 2.0) << s.log;  // it waited for the timeout ...
  EXPECT_LT(s.seconds, 15.0) << s.log;  // ... and not much longer
  // Timed out at the handshake (naming the rank) or mid-transfer.
  EXPECT_TRUE(s.log.find("ranks that did not arrive: 1") != std::string::npos ||
              s.log.find("a peer stopped sending mid-collective (rank 1;") != std::string::npos)
      << s.log;
  EXPECT_NE(s.log.find("timeout after 3s"), std::string::npos) << s.log;
  // Which option sets the deadline (the error did not say).
  EXPECT_NE(s.log.find("pdist-train --collective-timeout-s"), std::string::npos) << s.log;
}

}  // namespace
}  // namespace pdist::tools

#endif  // PDIST_HAVE_GLOO
