// Rank environment, posix_spawn of one rank, rendezvous directory and free-port helpers.
#include "tools/rank_spawn.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <spawn.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace pdist::tools {
namespace {

// The variables the launcher owns: inherited values are dropped.
constexpr const char* kOwnedVariables[] = {"RANK",          "LOCAL_RANK",           "WORLD_SIZE",
                                           "LOCAL_WORLD_SIZE", "MASTER_ADDR",      "MASTER_PORT",
                                           "PDIST_BACKEND", "PDIST_RENDEZVOUS_DIR", "PDIST_LAUNCHER_PID"};

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

// Moves a pipe end off fds 0-2: if the launcher runs with a standard fd closed, a pipe can land
// there, and the child's dup2 onto 0, 1, 2 would overwrite it before using it.
int AboveStdio(int fd) {
  if (fd > 2) return fd;
  const int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  ::close(fd);
  return moved;
}

// A rendezvous store's key file: Gloo's FileStore names them by a decimal hash, pdist's
// DirectoryStore by the key in hex or "h<hash>-<length>". Anything else in the directory (a
// rank's outputs, when it is the working directory) is no key.
bool IsStoreKeyFile(const std::string& name) {
  const auto all = [&name](size_t from, const char* digits) {
    return name.size() > from && name.find_first_not_of(digits, from) == std::string::npos;
  };
  if (all(0, "0123456789") || all(0, "0123456789abcdef")) return true;
  return name.size() > 18 && name[0] == 'h' && name.find('-') == 17 && all(18, "0123456789") &&
         name.substr(1, 16).find_first_not_of("0123456789abcdef") == std::string::npos;
}

}  // namespace

std::vector<std::string> RankEnvironment(const LaunchOptions& o, int port, int rank) {
  std::vector<std::string> env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view item(*entry);
    const std::string_view name = item.substr(0, item.find('='));
    const bool owned = std::any_of(std::begin(kOwnedVariables), std::end(kOwnedVariables),
                                   [&](const char* v) { return name == v; }) ||
                       (!o.job_prefix.empty() && name == "PDIST_RENDEZVOUS_PREFIX");
    if (!owned) env.emplace_back(item);
  }
  env.push_back(absl::StrCat("RANK=", GlobalRank(o, rank)));
  env.push_back(absl::StrCat("LOCAL_RANK=", rank));
  env.push_back(absl::StrCat("WORLD_SIZE=", o.nnodes * o.nprocs));
  env.push_back(absl::StrCat("LOCAL_WORLD_SIZE=", o.nprocs));
  env.push_back(absl::StrCat("MASTER_ADDR=", o.master_addr));
  env.push_back(absl::StrCat("MASTER_PORT=", port));
  env.push_back(absl::StrCat("PDIST_BACKEND=", o.backend));
  if (!o.rendezvous_dir.empty()) env.push_back(absl::StrCat("PDIST_RENDEZVOUS_DIR=", o.rendezvous_dir));
  if (!o.job_prefix.empty()) env.push_back(absl::StrCat("PDIST_RENDEZVOUS_PREFIX=", o.job_prefix));
  env.push_back(absl::StrCat("PDIST_LAUNCHER_PID=", ::getpid()));  // ranks die with the launcher
  // Each rank's share of the cores, as torchrun sets it: every rank taking every core made dp2
  // under pdist-run ten times slower. A value the user set is kept.
  if (std::getenv("OMP_NUM_THREADS") == nullptr) {
    const long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
    env.push_back(absl::StrCat("OMP_NUM_THREADS=", std::max<long>(1, cores / std::max(1, o.nprocs))));
  }
  return env;
}

absl::StatusOr<pid_t> SpawnRank(const LaunchOptions& o, int port, int rank, int out_w, int err_w) {
  out_w = AboveStdio(out_w);
  err_w = AboveStdio(err_w);
  std::vector<std::string> argv = o.command;
  std::vector<std::string> env = RankEnvironment(o, port, rank);
  std::vector<char*> c_argv = CStrings(argv), c_env = CStrings(env);

  // posix_spawn rather than fork + exec: nothing of this process runs in the child between the
  // two (safe in a multi-threaded caller), and an exec failure comes back as the return value.
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_w, 1);
  posix_spawn_file_actions_adddup2(&actions, err_w, 2);
  sigset_t defaults, empty;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);  // the launcher ignores it (SignalRelay); a rank gets the usual behaviour
  sigemptyset(&empty);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  pid_t pid = -1;
  const int error = ::posix_spawnp(&pid, c_argv[0], &actions, &attr, c_argv.data(), c_env.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(out_w);
  ::close(err_w);
  if (error != 0) {
    return absl::InvalidArgumentError(absl::StrCat("cannot start rank ", rank, ": '", o.command[0], "': ",
                                                   std::strerror(error),
                                                   o.command[0].find('/') == std::string::npos ? " (looked up in PATH)" : ""));
  }
  return pid;
}

absl::Status PrepareRendezvousDir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (!fs::exists(dir, error)) {
    if (!fs::create_directories(dir, error)) {
      return absl::InvalidArgumentError(absl::StrCat("--rendezvous-dir '", dir, "': cannot create: ", error.message()));
    }
    return absl::OkStatus();
  }
  if (!fs::is_directory(dir, error)) {
    return absl::InvalidArgumentError(absl::StrCat("--rendezvous-dir '", dir, "' exists and is not a directory"));
  }
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    if (entry.is_regular_file(error) && IsStoreKeyFile(entry.path().filename().string())) {
      return absl::FailedPreconditionError(absl::StrCat("--rendezvous-dir '", dir, "' holds keys of an earlier job ('",
                                                        entry.path().filename().string(),
                                                        "'): they would mislead the rendezvous; remove them or pass a "
                                                        "fresh directory"));
    }
  }
  return absl::OkStatus();
}

void ClearRendezvousDir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code error;
  std::vector<fs::path> keys;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    if (entry.is_regular_file(error) && IsStoreKeyFile(entry.path().filename().string())) keys.push_back(entry.path());
  }
  for (const fs::path& key : keys) fs::remove(key, error);  // what cannot go is the next job's refusal
}

absl::StatusOr<int> PickFreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("picking a free port: socket: ", std::strerror(errno)));
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;  // the kernel chooses
  socklen_t length = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length) != 0) {
    const int saved = errno;
    ::close(fd);
    return absl::InternalError(absl::StrCat("picking a free port: bind 127.0.0.1:0: ", std::strerror(saved)));
  }
  ::close(fd);
  return static_cast<int>(ntohs(addr.sin_port));
}

}  // namespace pdist::tools
