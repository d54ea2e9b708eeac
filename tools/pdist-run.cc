// pdist-run: starts the ranks of a multi-process job on this machine (pdist's torchrun).
//
//   pdist-run --nprocs 4 -- ./my_trainer --steps 100
//   [rank 0] step 1 loss 5.52
//   [rank 1] step 1 loss 5.52
//   ...
//
// Exit status: 0 when every rank exited 0; the first failing rank's status (128 + its signal
// when one killed it); 124 after --timeout-s; 128 + the signal when pdist-run was interrupted;
// 1 when the job could not be started; 2 for bad usage.
#include <climits>
#include <cstdlib>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/timeline_files.h"
#include "tools/cli.h"
#include "tools/launcher.h"

namespace pdist {
namespace {

int UsageError(const std::string& message) {
  std::fprintf(stderr, "pdist-run: %s\n(run 'pdist-run --help' for usage)\n", message.c_str());
  return 2;
}

int Main(int argc, char** argv) {
  int64_t nprocs = 1, master_port = 0, nnodes = 1, node_rank = 0;
  double timeout_s = 0, grace_s = 30;
  tools::LaunchOptions options;
  cli::FlagSet flags(
      "pdist-run", "--nprocs N [options] -- COMMAND [ARGS...]",
      "Starts N processes of COMMAND (looked up in PATH) as ranks of one job, each with the rendezvous\n"
      "environment the gloo and nccl communicators read: RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,\n"
      "MASTER_ADDR, MASTER_PORT, PDIST_BACKEND, OMP_NUM_THREADS (cores / N unless set) and, with\n"
      "--rendezvous-dir, PDIST_RENDEZVOUS_DIR. A job over several nodes runs one pdist-run per node:\n"
      "  node 0: pdist-run --nnodes 2 --node-rank 0 --nprocs 2 --master-addr A --master-port P -- CMD\n"
      "  node 1: pdist-run --nnodes 2 --node-rank 1 --nprocs 2 --master-addr A --master-port P -- CMD\n"
      "Each rank's stdout and stderr come back line by line as \"[rank r] ...\" (stdin is /dev/null).\n"
      "When a rank fails, this node's other ranks get SIGTERM, then SIGKILL after 2 s (after --grace-s\n"
      "when it exited 130 or 143: it stopped on a signal, and its peers are saving), and pdist-run\n"
      "exits with that rank's status (the other nodes' ranks fail in their next collective). SIGINT and\n"
      "SIGTERM are forwarded to every rank, and --timeout-s sends SIGTERM; either is followed by SIGKILL\n"
      "after --grace-s (pdist-train finishes its step, saves and exits meanwhile, every rank after the\n"
      "same step); a SIGINT after either kills at once. The ranks die with their pdist-run.\n"
      "See docs/launcher.md.");
  flags.Int("nprocs", &nprocs, "number of ranks (processes) on this node, 1..1024");
  flags.Int("nproc-per-node", &nprocs, "the same as --nprocs (torchrun's name)");
  flags.Int("nnodes", &nnodes, "nodes of the job, each running one pdist-run with the same --nprocs (default 1)");
  flags.Int("node-rank", &node_rank, "this node's index, 0..nnodes-1; its ranks are node_rank·nprocs … ");
  flags.String("master-addr", &options.master_addr,
               "address of node 0, where rank 0 serves the TCP store (MASTER_ADDR; default 127.0.0.1)");
  flags.String("backend", &options.backend,
               "communicator backend the ranks use (PDIST_BACKEND): gloo (CPU), or nccl (one GPU per rank: LOCAL_RANK's)");
  flags.String("rendezvous-dir", &options.rendezvous_dir,
               "rendezvous through this directory (Gloo FileStore) instead of a TCP store; created if missing, must hold no store keys of an earlier job");
  flags.Int("master-port", &master_port,
            "MASTER_PORT of rank 0's TCP store (0: a free port; with --nnodes > 1 give one, the same on every node)");
  flags.Double("timeout-s", &timeout_s, "stop every rank after this many seconds (0: no limit)");
  flags.Double("grace-s", &grace_s,
               "seconds from a forwarded SIGINT/SIGTERM (or --timeout-s) to SIGKILL: time to finish a step and save");
  std::string timeline;
  flags.String("timeline", &timeline,
               "ranks write their step timelines here (PDIST_TIMELINE_DIR, read by pdist-train); afterwards pdist-run "
               "draws pipeline.svg from them, a row per rank");

  // The command starts after the first `--`; everything before it is pdist-run's own, so that
  // the command's flags (even --help) are never taken for pdist-run's.
  int split = 1;
  while (split < argc && std::string(argv[split]) != "--") ++split;
  const std::vector<std::string> positional =
      flags.ParseOrExit(split, const_cast<const char* const*>(argv));
  if (!positional.empty()) {
    return UsageError(absl::StrCat("unexpected argument '", positional[0],
                                   "': the command goes after `--` (pdist-run --nprocs N -- COMMAND [ARGS...])"));
  }
  if (split + 1 >= argc) {
    return UsageError(split == argc ? "missing `-- COMMAND [ARGS...]`: the command to start on every rank"
                                    : "missing command after `--`");
  }
  options.command.assign(argv + split + 1, argv + argc);

  // Two names for one count: both given is a contradiction or a copy-paste, not "the last wins".
  if (flags.Given("nprocs") && flags.Given("nproc-per-node")) {
    return UsageError("--nprocs and --nproc-per-node are the same count: give one of them");
  }
  // Out-of-range values keep their own number in the message (the struct holds an int).
  auto narrow = [](int64_t v) { return v < INT_MIN || v > INT_MAX ? INT_MIN : static_cast<int>(v); };
  if (narrow(nprocs) == INT_MIN) return UsageError(absl::StrCat("--nprocs ", nprocs, ": must be 1..", tools::kMaxProcs));
  if (narrow(master_port) == INT_MIN) return UsageError(absl::StrCat("--master-port ", master_port, ": must be 0..65535"));
  if (narrow(nnodes) == INT_MIN) return UsageError(absl::StrCat("--nnodes ", nnodes, ": must be 1..", tools::kMaxProcs));
  if (narrow(node_rank) == INT_MIN) return UsageError(absl::StrCat("--node-rank ", node_rank, ": out of range"));
  options.nprocs = narrow(nprocs);
  options.master_port = narrow(master_port);
  options.nnodes = narrow(nnodes);
  options.node_rank = narrow(node_rank);
  // Bounded both ways: a deadline below a nanosecond rounds to 0, which reads as "no limit" (a
  // millisecond is the floor kept); past 1e9 s (31 years) it overflows the clock and reads as
  // already passed.
  if (!(timeout_s == 0 || (timeout_s >= 1e-3 && timeout_s <= 1e9))) {
    return UsageError(absl::StrCat("--timeout-s ", timeout_s, ": must be 0 (no timeout) or 0.001..1e9 seconds"));
  }
  options.timeout = absl::Seconds(timeout_s);
  if (!(grace_s >= 0 && grace_s <= 1e7)) {
    return UsageError(absl::StrCat("--grace-s ", grace_s, ": must be 0..1e7 seconds"));
  }
  options.stop_grace = absl::Seconds(grace_s);
  if (absl::Status s = tools::ValidateLaunchOptions(options); !s.ok()) return UsageError(std::string(s.message()));

  if (!timeline.empty()) {
    // Made before the job, so that a path that cannot be a directory fails now, not after it.
    if (absl::Status made = engine::MakeTimelineDirectory(timeline); !made.ok()) {
      return UsageError(absl::StrCat("--timeline: ", made.message()));
    }
    ::setenv("PDIST_TIMELINE_DIR", timeline.c_str(), 1);  // the ranks inherit it
  }
  absl::StatusOr<tools::LaunchResult> result = tools::Launch(options);
  if (!result.ok()) {
    std::fprintf(stderr, "pdist-run: %s\n", std::string(result.status().message()).c_str());
    return 1;
  }
  if (!timeline.empty() && result->exit_code == 0) {
    if (absl::Status s = engine::DrawPipelineFromTraces(timeline, {.title = "pdist-run"}); !s.ok()) {
      std::fprintf(stderr, "pdist-run: timeline: %s\n", std::string(s.message()).c_str());
      return 1;
    }
    std::fprintf(stderr, "pdist-run: timeline in %s (pipeline.svg, rank<k>.trace.json)\n", timeline.c_str());
  }
  return result->exit_code;
}

}  // namespace
}  // namespace pdist

int main(int argc, char** argv) { return pdist::Main(argc, argv); }
