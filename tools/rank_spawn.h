// Starting one rank of a launched job: its environment, the process, and what the launcher
// prepares before the first rank (a free port, a fresh rendezvous directory). Launch
// (tools/launcher.h) uses these; they are apart so that each can be read, and tested, alone.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/launcher.h"

namespace pdist::tools {

// The environment of rank `rank`: this process's environment less any inherited rendezvous
// variable (a stale PDIST_RENDEZVOUS_DIR would win over the job's TCP store), plus RANK,
// LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT=port,
// PDIST_BACKEND and, when set, PDIST_RENDEZVOUS_DIR. "NAME=value" strings, as execve takes them.
std::vector<std::string> RankEnvironment(const LaunchOptions& options, int port, int rank);

// Starts options.command as rank `rank`: in a process group of its own (so that stopping a rank
// that is a shell script stops what it started), stdin from /dev/null (N ranks cannot share one
// terminal), stdout and stderr onto the pipe write ends out_w and err_w. Always closes out_w and
// err_w in this process: while the launcher held one, that pipe would never reach EOF. The
// command is looked up in PATH as execvp does; a command that cannot be executed is
// InvalidArgument naming it.
absl::StatusOr<pid_t> SpawnRank(const LaunchOptions& options, int port, int rank, int out_w, int err_w);

// A FileStore directory must start without keys: keys left by an earlier job would hand this
// job's ranks stale addresses, and the rendezvous would fail far from its cause. Creates a
// missing one (with its parents); FailedPrecondition naming a key file it holds (other files,
// such as a rank's outputs, are no keys).
absl::Status PrepareRendezvousDir(const std::string& dir);
// After a one-node job whose ranks have all exited: the store keys they left in `dir` (checked
// absent by PrepareRendezvousDir, so all of them this job's), so that the next job may use it
// again. Anything else a rank wrote there (outputs, when it is the working directory) stays.
void ClearRendezvousDir(const std::string& dir);

// A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0, read it back, close).
absl::StatusOr<int> PickFreePort();

}  // namespace pdist::tools
