// Launch: validation and the supervision loop (one thread, poll() over every rank's stdout and
// stderr pipe and the signal relay). Starting a rank is tools/rank_spawn.h.
#include "tools/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <memory>
#include <optional>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/comm_backend.h"
#include "ir/status.h"
#include "tools/prefixed_lines.h"
#include "tools/rank_spawn.h"
#include "tools/signal_relay.h"

namespace pdist::tools {
namespace {

using Clock = std::chrono::steady_clock;

absl::Status ErrnoError(const std::string& what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

std::string SignalName(int signal) {
  const char* text = ::strsignal(signal);
  return absl::StrCat("signal ", signal, text != nullptr ? absl::StrCat(" (", text, ")") : "");
}

// "exited with status 3", "was killed by signal 9 (Killed)".
std::string DescribeExit(int wait_status) {
  if (WIFEXITED(wait_status)) return absl::StrCat("exited with status ", WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    return absl::StrCat("was killed by ", SignalName(WTERMSIG(wait_status)),
                        WCOREDUMP(wait_status) ? " (core dumped)" : "");
  }
  return absl::StrCat("ended with wait status ", wait_status);
}

// As a shell reports a child: its exit status, or 128 + the signal that killed it.
int ExitCode(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

std::string Plural(size_t n, const std::string& word) { return n == 1 ? word : word + "s"; }

struct Stream {
  int fd = -1;  // read end, non-blocking; -1 once closed
  std::unique_ptr<PrefixedLines> lines;
};

struct Rank {
  pid_t pid = -1;  // also its process group: signals reach the rank's own children too
  bool running = false;
  int wait_status = 0;
  Stream out, err;
};

// One job: its ranks, and the state of the supervision loop.
class Job {
 public:
  Job(const LaunchOptions& o, SignalRelay& relay) : o_(o), relay_(relay), ranks_(o.nprocs) {}
  ~Job();

  absl::Status Start(int port);
  LaunchResult Run();

 private:
  void Say(const std::string& text) { WriteFully(o_.stderr_fd, absl::StrCat("pdist-run: ", text, "\n")); }
  std::vector<int> Running() const;
  std::string RankList(const std::vector<int>& ranks) const;
  void SignalEveryGroup(int signal);
  void BeginStop(int signal, absl::Duration grace);
  void Kill();
  Clock::time_point DrainDeadline() const;
  void ReadAvailable(Stream& s);
  void Close(Stream& s);
  bool AnyStreamOpen() const;
  void Reap();
  void HandleSignals();
  void CheckDeadlines();

  const LaunchOptions& o_;
  SignalRelay& relay_;
  std::vector<Rank> ranks_;
  LaunchResult result_;
  Clock::time_point start_ = Clock::now();
  bool stopping_ = false;
  int stop_signal_ = SIGTERM;
  absl::Duration stop_grace_;
  bool killed_ = false;
  Clock::time_point kill_at_;
  Clock::time_point killed_at_;
  std::optional<Clock::time_point> all_exited_at_;
};

Job::~Job() {
  // Only reached with ranks running when Start failed part-way: kill and reap them, so that no
  // rank outlives a launch that reported an error.
  for (Rank& r : ranks_) {
    if (r.running) {
      ::kill(-r.pid, SIGKILL);
      ::waitpid(r.pid, &r.wait_status, 0);
    }
    for (Stream* s : {&r.out, &r.err}) {
      if (s->fd >= 0) ::close(s->fd);
    }
  }
}

absl::Status Job::Start(int port) {
  for (int rank = 0; rank < o_.nprocs; ++rank) {
    Rank& r = ranks_[rank];
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0) return ErrnoError("pipe2");
    if (::pipe2(err, O_CLOEXEC) != 0) {
      ::close(out[0]);
      ::close(out[1]);
      return ErrnoError("pipe2");
    }
    const int global = GlobalRank(o_, rank);
    r.out = {out[0], std::make_unique<PrefixedLines>(absl::StrCat("[rank ", global, "] "), o_.stdout_fd)};
    r.err = {err[0], std::make_unique<PrefixedLines>(absl::StrCat("[rank ", global, "] "), o_.stderr_fd)};
    for (int fd : {out[0], err[0]}) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    absl::StatusOr<pid_t> pid = SpawnRank(o_, port, rank, out[1], err[1]);  // closes out[1], err[1]
    if (!pid.ok()) return pid.status();
    r.pid = *pid;
    r.running = true;
  }
  return absl::OkStatus();
}

std::vector<int> Job::Running() const {
  std::vector<int> running;
  for (int rank = 0; rank < o_.nprocs; ++rank) {
    if (ranks_[rank].running) running.push_back(GlobalRank(o_, rank));
  }
  return running;
}

std::string Job::RankList(const std::vector<int>& ranks) const {
  return absl::StrCat(Plural(ranks.size(), "rank"), " ", absl::StrJoin(ranks, ", "));
}

// A stopped job leaves nothing behind: the process groups of ranks that already exited may still
// hold what those ranks started (a background `sleep 600 &` of a shell script). A reaped rank's
// pid cannot have been reused as a group id while its group has members, and a group without
// members makes kill() fail harmlessly (short of the pid space wrapping around in between).
void Job::SignalEveryGroup(int signal) {
  for (Rank& r : ranks_) {
    if (r.pid > 0 && ::kill(-r.pid, signal) != 0 && r.running) ::kill(r.pid, signal);
  }
}

void Job::BeginStop(int signal, absl::Duration grace) {
  stopping_ = true;
  stop_signal_ = signal;
  stop_grace_ = grace;
  kill_at_ = Clock::now() + absl::ToChronoNanoseconds(grace);
  SignalEveryGroup(signal);
}

void Job::Kill() {
  SignalEveryGroup(SIGKILL);
  killed_ = true;
  killed_at_ = Clock::now();
}

// When to stop reading the output of ranks that have all exited (see CheckDeadlines).
Clock::time_point Job::DrainDeadline() const {
  const auto grace = absl::ToChronoNanoseconds(o_.grace);
  Clock::time_point deadline = *all_exited_at_ + grace;
  if (stopping_) deadline = std::max(deadline, (killed_ ? killed_at_ : kill_at_) + grace);
  return deadline;
}

void Job::ReadAvailable(Stream& s) {
  char buffer[16384];
  // Bounded, so that one chatty rank cannot starve the others or the signal handling.
  for (int i = 0; i < 16 && s.fd >= 0; ++i) {
    const ssize_t n = ::read(s.fd, buffer, sizeof(buffer));
    if (n > 0) {
      s.lines->Feed(std::string_view(buffer, static_cast<size_t>(n)));
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
      Close(s);
    } else if (errno == EAGAIN) {
      break;
    }
  }
}

void Job::Close(Stream& s) {
  if (s.fd < 0) return;
  s.lines->Finish();
  ::close(s.fd);
  s.fd = -1;
}

bool Job::AnyStreamOpen() const {
  return std::any_of(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.out.fd >= 0 || r.err.fd >= 0; });
}

void Job::Reap() {
  for (int rank = 0; rank < o_.nprocs; ++rank) {
    Rank& r = ranks_[rank];
    if (!r.running) continue;
    pid_t got;
    do {
      got = ::waitpid(r.pid, &r.wait_status, WNOHANG);
    } while (got < 0 && errno == EINTR);
    if (got != r.pid) continue;
    r.running = false;
    // Its last words first, so that they come before the launcher's account of its death.
    ReadAvailable(r.out);
    ReadAvailable(r.err);
    const bool failed = !WIFEXITED(r.wait_status) || WEXITSTATUS(r.wait_status) != 0;
    if (failed && !stopping_) {
      const size_t others = Running().size();
      result_.failed_rank = GlobalRank(o_, rank);
      result_.exit_code = ExitCode(r.wait_status);
      result_.message = absl::StrCat("rank ", GlobalRank(o_, rank), " ", DescribeExit(r.wait_status));
      if (others > 0) absl::StrAppend(&result_.message, "; stopping the other ", others, " ", Plural(others, "rank"));
      Say(result_.message);
      // A rank that exited 128 + SIGINT/SIGTERM stopped on a signal of its own, as asked (pdist-train
      // then saves): its peers are stopping too and get the time to save; any other failure, 2 s.
      const bool stopped_on_signal = WIFEXITED(r.wait_status) && (WEXITSTATUS(r.wait_status) == 128 + SIGINT ||
                                                                  WEXITSTATUS(r.wait_status) == 128 + SIGTERM);
      BeginStop(SIGTERM, stopped_on_signal ? o_.stop_grace : o_.grace);
    }
  }
  if (!all_exited_at_ && Running().empty()) all_exited_at_ = Clock::now();
}

void Job::HandleSignals() {
  for (int signal : relay_.Drain()) {
    if (signal != SIGINT && signal != SIGTERM) continue;  // SIGCHLD: Reap() follows anyway
    const std::vector<int> running = Running();
    if (running.empty()) continue;
    if (!stopping_) {
      result_.exit_code = 128 + signal;
      result_.message = absl::StrCat("received ", SignalName(signal), "; forwarding it to ", RankList(running));
      Say(result_.message);
      BeginStop(signal, o_.stop_grace);
    } else if (signal == SIGINT) {  // a person asking twice
      Say(absl::StrCat("received ", SignalName(signal), " again; killing ", RankList(running)));
      Kill();
    } else {
      // A scheduler may signal every process of the job, this one among them, and its SIGKILL
      // follows anyway: the ranks go on stopping.
      Say(absl::StrCat("received ", SignalName(signal), " again; the ranks are stopping (SIGINT kills them at once)"));
    }
  }
}

void Job::CheckDeadlines() {
  const Clock::time_point now = Clock::now();
  const std::vector<int> running = Running();
  if (!stopping_ && o_.timeout > absl::ZeroDuration() && now >= start_ + absl::ToChronoNanoseconds(o_.timeout) &&
      !running.empty()) {
    result_.exit_code = 124;
    result_.message = absl::StrCat("timeout: the job ran longer than ", absl::FormatDuration(o_.timeout),
                                   " (--timeout-s); stopping ", RankList(running));
    Say(result_.message);
    BeginStop(SIGTERM, o_.stop_grace);
  } else if (stopping_ && !killed_ && now >= kill_at_ && (!running.empty() || AnyStreamOpen())) {
    if (!running.empty()) {
      Say(absl::StrCat(RankList(running), " still running ",
                       stop_grace_ == absl::ZeroDuration() ? "0s" : absl::FormatDuration(stop_grace_), " after ",
                       stop_signal_ == SIGINT ? "SIGINT" : "SIGTERM", "; sending SIGKILL"));
    }
    Kill();  // also what the exited ranks left behind, still holding their output open
  }
  // Every rank has exited but a pipe is still open: something a rank started in the background
  // holds it. Reading on would wait for that process, not for the job.
  if (all_exited_at_ && now >= DrainDeadline()) {
    for (int rank = 0; rank < o_.nprocs; ++rank) {
      Rank& r = ranks_[rank];
      if (r.out.fd < 0 && r.err.fd < 0) continue;
      Say(absl::StrCat("rank ", GlobalRank(o_, rank), " exited but its output is still held open (by a process it left behind); "
                       "no longer reading it"));
      Close(r.out);
      Close(r.err);
    }
  }
}

LaunchResult Job::Run() {
  while (!Running().empty() || AnyStreamOpen()) {
    // Sleep until output, a signal, or the nearest deadline; at most 200 ms as a backstop.
    const Clock::time_point now = Clock::now();
    Clock::time_point wake = now + std::chrono::milliseconds(200);
    if (o_.timeout > absl::ZeroDuration() && !stopping_) {
      wake = std::min(wake, start_ + absl::ToChronoNanoseconds(o_.timeout));
    }
    if (stopping_ && !killed_) wake = std::min(wake, kill_at_);
    if (all_exited_at_) wake = std::min(wake, DrainDeadline());
    const auto wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count();

    std::vector<pollfd> fds = {{relay_.fd(), POLLIN, 0}};
    std::vector<Stream*> streams = {nullptr};
    for (Rank& r : ranks_) {
      for (Stream* s : {&r.out, &r.err}) {
        if (s->fd < 0) continue;
        fds.push_back({s->fd, POLLIN, 0});
        streams.push_back(s);
      }
    }
    const int ready = ::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(0, wait_ms) + 1));
    if (ready > 0) {
      for (size_t i = 1; i < fds.size(); ++i) {
        if (fds[i].revents != 0) ReadAvailable(*streams[i]);
      }
    }
    HandleSignals();
    Reap();
    CheckDeadlines();
  }
  for (const Rank& r : ranks_) result_.wait_status.push_back(r.wait_status);
  return result_;
}

}  // namespace

absl::Status ValidateLaunchOptions(const LaunchOptions& o) {
  if (o.nprocs < 1 || o.nprocs > kMaxProcs) {
    return absl::InvalidArgumentError(absl::StrCat("--nprocs ", o.nprocs, ": must be 1..", kMaxProcs));
  }
  absl::StatusOr<const engine::CommBackend*> backend = engine::FindCommBackend(o.backend);
  if (!backend.ok()) {
    // Only the backends whose ranks are processes can be launched: name those.
    std::vector<std::string> launchable;
    for (const engine::CommBackend& b : engine::CommBackends()) {
      if (b.process_per_rank) launchable.push_back(b.name);
    }
    return absl::InvalidArgumentError(absl::StrCat("--backend '", o.backend, "': expected ",
                                                   absl::StrJoin(launchable, " or "), " (ranks that are processes)"));
  }
  if (!(*backend)->process_per_rank) {
    return absl::InvalidArgumentError(absl::StrCat("--backend ", o.backend, ": its ranks are threads of one process, ",
                                                   "not processes to launch; use `pdist-train --ranks N`"));
  }
  if (o.master_port < 0 || o.master_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--master-port ", o.master_port, ": must be 0..65535 (0: pick a free port)"));
  }
  if (o.nnodes < 1 || o.nnodes > kMaxProcs) {
    return absl::InvalidArgumentError(absl::StrCat("--nnodes ", o.nnodes, ": must be 1..", kMaxProcs));
  }
  if (o.node_rank < 0 || o.node_rank >= o.nnodes) {
    return absl::InvalidArgumentError(
        absl::StrCat("--node-rank ", o.node_rank, ": must be 0..", o.nnodes - 1, " (--nnodes ", o.nnodes, ")"));
  }
  if (o.nnodes > 1 && o.master_port == 0 && o.rendezvous_dir.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--nnodes ", o.nnodes, " needs --master-port P (the same on every node: rank 0 serves the store there) or a "
        "--rendezvous-dir every node can see"));
  }
  if (o.master_addr.empty()) return absl::InvalidArgumentError("--master-addr: empty");
  if (o.timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--timeout-s ", absl::ToDoubleSeconds(o.timeout), ": must be >= 0 (0: no timeout)"));
  }
  if (o.grace < absl::ZeroDuration() || o.stop_grace < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("grace period: must be >= 0");
  }
  if (o.command.empty() || o.command[0].empty()) {
    return absl::InvalidArgumentError("no command to run: pdist-run [options] -- COMMAND [ARGS...]");
  }
  return absl::OkStatus();
}

absl::StatusOr<LaunchResult> Launch(const LaunchOptions& given) {
  if (absl::Status s = ValidateLaunchOptions(given); !s.ok()) return s;
  LaunchOptions options = given;
  if (options.job_prefix.empty() && options.nnodes == 1) {
    std::random_device entropy;
    options.job_prefix = absl::StrFormat("pdist-%08x%08x", entropy(), entropy());
  }
  if (!options.rendezvous_dir.empty()) {
    if (absl::Status s = PrepareRendezvousDir(options.rendezvous_dir); !s.ok()) return s;
  }
  int port = options.master_port;
  if (port == 0) {
    absl::StatusOr<int> free_port = PickFreePort();
    if (!free_port.ok()) return free_port.status();
    port = *free_port;
  }
  // Before the first spawn: a rank that exits at once must already wake the loop.
  absl::StatusOr<std::unique_ptr<SignalRelay>> relay = SignalRelay::Install(options.forward_signals);
  if (!relay.ok()) return relay.status();
  Job job(options, **relay);
  const absl::Status started = job.Start(port);
  absl::StatusOr<LaunchResult> result = started.ok() ? job.Run() : absl::StatusOr<LaunchResult>(started);
  // Every rank of this node has exited; with one node, every rank of the job (several nodes share
  // the directory, and another may still be reading it).
  if (!options.rendezvous_dir.empty() && options.nnodes == 1) ClearRendezvousDir(options.rendezvous_dir);
  return result;
}

}  // namespace pdist::tools
