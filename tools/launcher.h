// Launch: starts N copies of a command as the ranks of one job on this machine (what torchrun and
// `python -m paddle.distributed.launch` do), supervises them and says how the job ended. It is
// the body of pdist-run (docs/launcher.md).
//
//   LaunchOptions o;
//   o.nprocs = 4;
//   o.command = {"./train", "--steps", "100"};
//   PDIST_ASSIGN_OR_RETURN(LaunchResult r, Launch(o));
//   return r.exit_code;
//
// Every rank gets the torchrun-style rendezvous environment that the gloo communicator reads
// (executor/comm/gloo/gloo_communicator.h): RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT, PDIST_BACKEND and, with a rendezvous directory,
// PDIST_RENDEZVOUS_DIR. With nnodes > 1 one launcher runs on each node (torchrun's --nnodes,
// --node-rank, --master-addr). Its stdout and stderr come back line by line with "[rank r] " in front.
// The first rank to fail (non-zero exit or a signal) stops the job: the others get SIGTERM, and
// SIGKILL after a grace period. A stop asked for from outside (SIGINT or SIGTERM to the launcher,
// the job's time limit) waits longer before SIGKILL: pdist-train then finishes its step, saves
// and exits, every rank after the same step.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace pdist::tools {

struct LaunchOptions {
  int nprocs = 1;                  // 1..kMaxProcs ranks on this node (torchrun's --nproc-per-node)
  // Several nodes form one job of nnodes × nprocs ranks: this node's ranks are
  // node_rank·nprocs … (node_rank+1)·nprocs − 1; rank 0 (on node 0) serves the TCP store at
  // master_addr:master_port, which every node must name alike (so the port cannot be picked).
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  std::string backend = "gloo";    // PDIST_BACKEND; only gloo has ranks that are processes
  std::string rendezvous_dir;      // PDIST_RENDEZVOUS_DIR when set: created if missing, holding no store keys
  // PDIST_RENDEZVOUS_PREFIX, under which every rank's store keys go: one job's own, so that a rank
  // of another job on the same port or directory reads and writes none of this one's (two jobs
  // given one --master-port killed each other). Launch draws one for a one-node job; with several
  // nodes they cannot agree on a random one, and an inherited PDIST_RENDEZVOUS_PREFIX is kept.
  std::string job_prefix;
  int master_port = 0;             // MASTER_PORT; 0: a free port, found by binding port 0
  absl::Duration timeout = absl::ZeroDuration();  // stop the whole job after this; 0: never
  absl::Duration grace = absl::Seconds(2);        // SIGTERM → SIGKILL, after a rank failed
  // SIGINT/SIGTERM forwarded, or the time limit → SIGKILL: time to finish a step and save.
  absl::Duration stop_grace = absl::Seconds(30);
  std::vector<std::string> command;               // argv of every rank; [0] is looked up in PATH
  // Where the ranks' prefixed output and the launcher's own messages ("pdist-run: ...") go. Any
  // fd, so that tests can capture it in a file.
  int stdout_fd = 1;
  int stderr_fd = 2;
  // Catch SIGINT/SIGTERM while the job runs and send them on to every rank (then SIGKILL after
  // stop_grace; a SIGINT after either kills at once, a second SIGTERM is only reported).
  bool forward_signals = true;
};

inline constexpr int kMaxProcs = 1024;

// The job-wide rank of this node's `local_rank`.
inline int GlobalRank(const LaunchOptions& o, int local_rank) { return o.node_rank * o.nprocs + local_rank; }

// How the job ended.
struct LaunchResult {
  // What pdist-run exits with: 0 when every rank exited 0; otherwise the first failing rank's
  // exit status, or 128 + its signal (as a shell reports it); 124 for the timeout (as timeout(1));
  // 128 + the signal when the launcher itself was interrupted.
  int exit_code = 0;
  int failed_rank = -1;      // the first rank that failed on its own; -1 when none did
  std::string message;       // the launcher's account of the failure ("" on success), also written to stderr_fd
  std::vector<int> wait_status;  // per rank, as waitpid() reported it
};

// InvalidArgument for options no launch can use, naming the flag pdist-run takes for the field:
// "--nprocs 0: must be 1..1024".
absl::Status ValidateLaunchOptions(const LaunchOptions& options);

// Runs the job to its end. An error Status means no job ran: invalid options, a command that
// cannot be started (every rank already started is killed first), a launch already running in
// this process (signal handling is process-wide). A job that ran and failed is an OK result with
// a non-zero exit_code.
absl::StatusOr<LaunchResult> Launch(const LaunchOptions& options);

}  // namespace pdist::tools
