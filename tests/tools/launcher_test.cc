// Launch (pdist-run's body) with /bin/sh ranks: the rendezvous environment of every rank,
// prefixed line-by-line output, a failing rank stopping the rest, SIGKILL after the grace period,
// the timeout, SIGTERM forwarding, option errors. Output is captured through files passed as
// LaunchOptions::stdout_fd / stderr_fd.
#include "tools/launcher.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_path.h"
#include "tools/rank_spawn.h"

namespace pdist::tools {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

using Clock = std::chrono::steady_clock;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The lines of `text` that carry "[rank r] ", without the prefix, in order.
std::vector<std::string> RankLines(const std::string& text, int rank) {
  const std::string prefix = "[rank " + std::to_string(rank) + "] ";
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (absl::StartsWith(line, prefix)) lines.emplace_back(line.substr(prefix.size()));
  }
  return lines;
}

double SecondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

class LaunchTest : public ::testing::Test {
 protected:
  // Runs a job of `nprocs` ranks of `sh -c script`, capturing its output in out_ / err_.
  absl::StatusOr<LaunchResult> RunSh(int nprocs, const std::string& script, LaunchOptions o = {}) {
    o.nprocs = nprocs;
    o.command = {"/bin/sh", "-c", script};
    return Run(o);
  }

  absl::StatusOr<LaunchResult> Run(LaunchOptions o) {
    const std::string out_path = pdist::testing::UniqueTempPath("stdout");
    const std::string err_path = pdist::testing::UniqueTempPath("stderr");
    o.stdout_fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    o.stderr_fd = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const Clock::time_point start = Clock::now();
    absl::StatusOr<LaunchResult> result = Launch(o);
    seconds_ = SecondsSince(start);
    ::close(o.stdout_fd);
    ::close(o.stderr_fd);
    out_ = ReadAll(out_path);
    err_ = ReadAll(err_path);
    std::filesystem::remove(out_path);
    std::filesystem::remove(err_path);
    return result;
  }

  std::string out_, err_;
  double seconds_ = 0;
};

TEST_F(LaunchTest, EveryRankGetsTheRendezvousEnvironment) {
  absl::StatusOr<LaunchResult> r =
      RunSh(3, "echo $RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $MASTER_ADDR $PDIST_BACKEND; echo $MASTER_PORT");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 0) << err_;
  EXPECT_EQ(r->failed_rank, -1);
  EXPECT_THAT(r->message, IsEmpty());
  std::set<std::string> ports;
  for (int rank = 0; rank < 3; ++rank) {
    const std::vector<std::string> lines = RankLines(out_, rank);
    ASSERT_EQ(lines.size(), 2u) << out_;
    const std::string id = std::to_string(rank);
    EXPECT_EQ(lines[0], id + " " + id + " 3 3 127.0.0.1 gloo");
    ports.insert(lines[1]);
  }
  ASSERT_EQ(ports.size(), 1u) << "every rank must see the same MASTER_PORT:\n" << out_;
  const int port = std::atoi(ports.begin()->c_str());
  EXPECT_GT(port, 0);
  EXPECT_LT(port, 65536);
  EXPECT_THAT(r->wait_status, ElementsAre(0, 0, 0));
}

TEST_F(LaunchTest, MasterPortAndRendezvousDirWhenGiven) {
  LaunchOptions o;
  o.master_port = 29517;
  o.rendezvous_dir = pdist::testing::UniqueTempPath("rdzv");  // does not exist yet: created
  absl::StatusOr<LaunchResult> r = RunSh(2, "echo $MASTER_PORT $PDIST_RENDEZVOUS_DIR", o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 0) << err_;
  EXPECT_THAT(RankLines(out_, 1), ElementsAre("29517 " + o.rendezvous_dir));
  EXPECT_TRUE(std::filesystem::is_directory(o.rendezvous_dir));

  // A directory with keys of an earlier job is refused before any rank starts (another file
  // is no key: the directory may be where the ranks write their outputs).
  std::ofstream(o.rendezvous_dir + "/losses.json") << "{}";
  ASSERT_TRUE(RunSh(2, "true", o).ok());
  std::ofstream(o.rendezvous_dir + "/1669894788139398375") << "x";  // Gloo's FileStore names keys so
  r = RunSh(2, "echo started", o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr(o.rendezvous_dir));
  EXPECT_THAT(out_, IsEmpty());
  std::filesystem::remove_all(o.rendezvous_dir);
}

TEST_F(LaunchTest, InheritedRendezvousDirIsDropped) {
  // A stale value in the caller's environment would otherwise override this job's TCP store.
  ::setenv("PDIST_RENDEZVOUS_DIR", "/stale/dir", 1);
  ::setenv("RANK", "7", 1);
  absl::StatusOr<LaunchResult> r = RunSh(1, "echo \"[$PDIST_RENDEZVOUS_DIR] $RANK\"");
  ::unsetenv("PDIST_RENDEZVOUS_DIR");
  ::unsetenv("RANK");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(RankLines(out_, 0), ElementsAre("[] 0"));
}

// Each one-node job keys its rendezvous under a prefix of its own (an inherited one dropped): a
// rank of a second job started on the same --master-port read and wrote the first job's keys,
// and both died.
TEST_F(LaunchTest, EachJobHasARendezvousPrefixOfItsOwn) {
  ::setenv("PDIST_RENDEZVOUS_PREFIX", "stale", 1);
  std::set<std::string> prefixes;
  for (int job = 0; job < 2; ++job) {
    absl::StatusOr<LaunchResult> r = RunSh(2, "echo $PDIST_RENDEZVOUS_PREFIX");
    ASSERT_TRUE(r.ok()) << r.status();
    const std::vector<std::string> zero = RankLines(out_, 0), one = RankLines(out_, 1);
    ASSERT_EQ(zero.size(), 1u) << out_;
    EXPECT_EQ(zero, one);  // one job, one prefix
    EXPECT_THAT(zero[0], ::testing::StartsWith("pdist-"));
    prefixes.insert(zero[0]);
  }
  ::unsetenv("PDIST_RENDEZVOUS_PREFIX");
  EXPECT_EQ(prefixes.size(), 2u);
}

TEST_F(LaunchTest, OutputIsPrefixedLineByLine) {
  // Two lines, a line written in two pieces, a last line without '\n'; the same on stderr.
  absl::StatusOr<LaunchResult> r = RunSh(2,
                                         "printf 'one\\ntwo\\n'; printf 'hel'; sleep 0.2; printf 'lo\\n';"
                                         "printf \"err $RANK\\nerr tail\" >&2; printf \"no newline $RANK\"");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 0) << err_;
  for (int rank = 0; rank < 2; ++rank) {
    const std::string id = std::to_string(rank);
    EXPECT_THAT(RankLines(out_, rank), ElementsAre("one", "two", "hello", "no newline " + id)) << out_;
    EXPECT_THAT(RankLines(err_, rank), ElementsAre("err " + id, "err tail")) << err_;
  }
  // Nothing but whole prefixed lines: every line of both streams starts with a prefix.
  for (const std::string& text : {out_, err_}) {
    ASSERT_FALSE(text.empty());
    EXPECT_EQ(text.back(), '\n');
    for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
      EXPECT_TRUE(absl::StartsWith(line, "[rank 0] ") || absl::StartsWith(line, "[rank 1] ")) << line;
    }
  }
}

TEST_F(LaunchTest, ManyLinesFromManyRanksNeverMix) {
  absl::StatusOr<LaunchResult> r = RunSh(4, "i=0; while [ $i -lt 200 ]; do echo \"rank $RANK line $i\"; i=$((i+1)); done");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 0) << err_;
  for (int rank = 0; rank < 4; ++rank) {
    const std::vector<std::string> lines = RankLines(out_, rank);
    ASSERT_EQ(lines.size(), 200u);
    for (int i = 0; i < 200; ++i) EXPECT_EQ(lines[i], "rank " + std::to_string(rank) + " line " + std::to_string(i));
  }
}

TEST_F(LaunchTest, FailingRankStopsTheOthers) {
  absl::StatusOr<LaunchResult> r =
      RunSh(4, "if [ \"$RANK\" = 1 ]; then echo 'rank 1 gives up' >&2; exit 3; fi; sleep 60");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_LT(seconds_, 10.0) << "the sleeping ranks were not stopped";
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->failed_rank, 1);
  EXPECT_EQ(r->message, "rank 1 exited with status 3; stopping the other 3 ranks");
  EXPECT_THAT(err_, HasSubstr("pdist-run: rank 1 exited with status 3; stopping the other 3 ranks\n"));
  // The rank's last words come before the launcher's account of its exit.
  EXPECT_LT(err_.find("[rank 1] rank 1 gives up"), err_.find("pdist-run: rank 1"));
  ASSERT_EQ(r->wait_status.size(), 4u);
  for (int rank : {0, 2, 3}) {
    EXPECT_TRUE(WIFSIGNALED(r->wait_status[rank]) && WTERMSIG(r->wait_status[rank]) == SIGTERM) << "rank " << rank;
  }
}

TEST_F(LaunchTest, RankKilledBySignal) {
  absl::StatusOr<LaunchResult> r = RunSh(1, "kill -KILL $$");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 128 + SIGKILL);
  EXPECT_EQ(r->failed_rank, 0);
  EXPECT_THAT(r->message, HasSubstr("rank 0 was killed by signal 9"));
  EXPECT_THAT(r->message, ::testing::Not(HasSubstr("stopping")));  // nothing left to stop
}

TEST_F(LaunchTest, RankIgnoringSigtermIsKilledAfterTheGracePeriod) {
  LaunchOptions o;
  o.grace = absl::Milliseconds(500);
  // Rank 1 fails once rank 0 ignores SIGTERM (the marker file says so).
  const std::string marker = pdist::testing::UniqueTempPath("trapped");
  std::filesystem::remove(marker);
  absl::StatusOr<LaunchResult> r = RunSh(2,
                                         "if [ \"$RANK\" = 1 ]; then while [ ! -e '" + marker +
                                             "' ]; do sleep 0.05; done; exit 1; fi; trap '' TERM; touch '" + marker +
                                             "'; sleep 60",
                                         o);
  std::filesystem::remove(marker);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_LT(seconds_, 10.0);
  EXPECT_EQ(r->exit_code, 1);
  EXPECT_EQ(r->failed_rank, 1);
  EXPECT_THAT(err_, HasSubstr("pdist-run: rank 0 still running 500ms after SIGTERM; sending SIGKILL"));
  EXPECT_TRUE(WIFSIGNALED(r->wait_status[0]) && WTERMSIG(r->wait_status[0]) == SIGKILL);
}

TEST_F(LaunchTest, TimeoutStopsTheJob) {
  LaunchOptions o;
  o.timeout = absl::Milliseconds(500);
  absl::StatusOr<LaunchResult> r = RunSh(2, "echo up; sleep 60", o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GE(seconds_, 0.5);
  EXPECT_LT(seconds_, 10.0);
  EXPECT_EQ(r->exit_code, 124);
  EXPECT_EQ(r->failed_rank, -1);
  EXPECT_THAT(r->message, HasSubstr("timeout: the job ran longer than 500ms (--timeout-s); stopping ranks 0, 1"));
  EXPECT_THAT(err_, HasSubstr("pdist-run: timeout"));
  EXPECT_THAT(RankLines(out_, 1), ElementsAre("up"));
}

TEST_F(LaunchTest, ForwardsSigtermToTheRanks) {
  const std::string marker = pdist::testing::UniqueTempPath("started");
  std::filesystem::remove(marker);
  // Signal the test process (the launcher) once rank 0 runs, as `kill <pdist-run pid>` would.
  std::thread signaller([&] {
    for (int i = 0; i < 500 && !std::filesystem::exists(marker); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ::kill(::getpid(), SIGTERM);
  });
  absl::StatusOr<LaunchResult> r = RunSh(2, "[ \"$RANK\" = 0 ] && touch '" + marker + "'; sleep 60");
  signaller.join();
  std::filesystem::remove(marker);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_LT(seconds_, 10.0);
  EXPECT_EQ(r->exit_code, 128 + SIGTERM);
  EXPECT_THAT(r->message, HasSubstr("received signal 15"));
  EXPECT_THAT(r->message, HasSubstr("forwarding it to ranks 0, 1"));
  for (int status : r->wait_status) EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
  // The launcher put the process's own disposition back.
  struct sigaction now = {};
  ::sigaction(SIGTERM, nullptr, &now);
  EXPECT_EQ(now.sa_handler, SIG_DFL);
}

TEST_F(LaunchTest, OutputHeldOpenByALeftoverProcessDoesNotHang) {
  LaunchOptions o;
  o.grace = absl::Milliseconds(300);
  absl::StatusOr<LaunchResult> r = RunSh(1, "sleep 3 & echo done", o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_LT(seconds_, 2.5);
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_THAT(RankLines(out_, 0), ElementsAre("done"));
  EXPECT_THAT(err_, HasSubstr("rank 0 exited but its output is still held open"));
}

// True once `pid` is gone (or a zombie waiting for init): it is not the test's child.
bool ProcessGone(pid_t pid) {
  for (int i = 0; i < 100; ++i) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) return true;
    const size_t close = line.rfind(')');
    if (close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z') return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
  }
  return false;
}

TEST_F(LaunchTest, StoppedJobLeavesNothingBehind) {
  // Rank 0 leaves a process in its group that ignores SIGTERM and holds its output; rank 1 fails
  // once that process exists. The stop must end it (SIGKILL to the group), not just stop reading.
  // The process writes its own pid (the inner sh's $$, kept by `exec sleep`), so the pid file
  // appears only once SIGTERM is already ignored: the SIGTERM of the stop cannot end it instead.
  LaunchOptions o;
  o.grace = absl::Milliseconds(300);
  const std::string pid_file = pdist::testing::UniqueTempPath("leftover_pid");
  std::filesystem::remove(pid_file);
  absl::StatusOr<LaunchResult> r = RunSh(2,
                                         "if [ \"$RANK\" = 1 ]; then while [ ! -e '" + pid_file +
                                             "' ]; do sleep 0.05; done; exit 1; fi; "
                                             "(trap '' TERM; exec sh -c \"echo \\$\\$ > '" + pid_file + ".tmp'; mv '" +
                                             pid_file + ".tmp' '" + pid_file + "'; exec sleep 30\") & wait",
                                         o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_LT(seconds_, 5.0);
  EXPECT_EQ(r->exit_code, 1);
  EXPECT_THAT(err_, ::testing::Not(HasSubstr("still held open"))) << err_;
  const pid_t leftover = std::atoi(ReadAll(pid_file).c_str());
  std::filesystem::remove(pid_file);
  ASSERT_GT(leftover, 0);
  EXPECT_TRUE(ProcessGone(leftover)) << "the job's background process " << leftover << " survived the stop";
}

TEST_F(LaunchTest, CommandIsLookedUpInPath) {
  LaunchOptions o;
  o.nprocs = 2;
  o.command = {"sh", "-c", "echo via path"};
  absl::StatusOr<LaunchResult> r = Run(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(RankLines(out_, 1), ElementsAre("via path"));

  o.command = {"pdist-no-such-command-xyz"};
  r = Run(o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("cannot start rank 0: 'pdist-no-such-command-xyz'"));
  EXPECT_THAT(r.status().message(), HasSubstr("looked up in PATH"));
}

TEST(LaunchOptionsTest, ErrorsNameTheFlag) {
  LaunchOptions o;
  o.command = {"true"};
  EXPECT_TRUE(ValidateLaunchOptions(o).ok());
  auto error = [&](auto edit) {
    LaunchOptions bad = o;
    edit(bad);
    return std::string(ValidateLaunchOptions(bad).message());
  };
  EXPECT_EQ(error([](LaunchOptions& b) { b.nprocs = 0; }), "--nprocs 0: must be 1..1024");
  EXPECT_EQ(error([](LaunchOptions& b) { b.nprocs = 1025; }), "--nprocs 1025: must be 1..1024");
  EXPECT_THAT(error([](LaunchOptions& b) { b.command.clear(); }), HasSubstr("no command to run"));
  EXPECT_THAT(error([](LaunchOptions& b) { b.backend = "inproc"; }), HasSubstr("use `pdist-train --ranks N`"));
  EXPECT_THAT(error([](LaunchOptions& b) { b.backend = "mpi"; }),
              HasSubstr("--backend 'mpi': expected gloo or nccl (ranks that are processes)"));
  EXPECT_THAT(error([](LaunchOptions& b) { b.master_port = 70000; }), HasSubstr("--master-port 70000"));
  EXPECT_THAT(error([](LaunchOptions& b) { b.timeout = absl::Seconds(-1); }), HasSubstr("--timeout-s -1"));
  // Launch checks the same, before starting anything.
  o.nprocs = 0;
  EXPECT_EQ(Launch(o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(PickFreePortTest, ReturnsABindablePort) {
  absl::StatusOr<int> port = PickFreePort();
  ASSERT_TRUE(port.ok()) << port.status();
  EXPECT_GT(*port, 0);
  EXPECT_LT(*port, 65536);
}

}  // namespace
}  // namespace pdist::tools
