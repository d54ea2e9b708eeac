// BackendFromEnvironment, LaunchedProcesses, FollowLauncher.
#include "engine/launched_rank.h"

#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace pdist::engine {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

}  // namespace

std::string BackendFromEnvironment() {
  if (!Env("PDIST_BACKEND").empty()) return Env("PDIST_BACKEND");
  for (const char* size_var : {"SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE"}) {
    int size = 0;
    if (absl::SimpleAtoi(Env(size_var), &size) && size > 1) return "gloo";
  }
  return "inproc";
}

int64_t LaunchedProcesses() {
  // A size with its rank: an allocation's shell (salloc, sbatch) has SLURM_NTASKS but is no rank.
  for (const auto& [rank_var, size_var] : {std::pair{"RANK", "WORLD_SIZE"}, {"SLURM_PROCID", "SLURM_NTASKS"},
                                           {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}, {"PMI_RANK", "PMI_SIZE"}}) {
    if (Env(rank_var).empty() || Env(size_var).empty()) continue;
    int64_t size = 0;
    return absl::SimpleAtoi(Env(size_var), &size) && size > 0 ? size : 1;
  }
  return 1;
}

absl::Status FollowLauncher() {
  const std::string launcher = Env("PDIST_LAUNCHER_PID");
  if (launcher.empty()) return absl::OkStatus();
  int64_t pid = 0;
  if (!absl::SimpleAtoi(launcher, &pid) || pid < 1) {
    return absl::InvalidArgumentError(absl::StrCat("PDIST_LAUNCHER_PID='", launcher, "' is not a process id"));
  }
  // SIGTERM when the parent dies: the launcher, or a wrapper script the rank runs under (which
  // dies with the launcher's signals to its process group).
  if (::prctl(PR_SET_PDEATHSIG, SIGTERM) != 0) return absl::InternalError("prctl(PR_SET_PDEATHSIG) failed");
  // The launcher may have died before the prctl (this process was then re-parented): then it
  // is no longer there to signal.
  if (static_cast<int64_t>(::getppid()) != pid && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
    return absl::AbortedError(absl::StrCat("the launcher (pid ", pid, ") is gone; not starting this rank"));
  }
  return absl::OkStatus();
}

}  // namespace pdist::engine
