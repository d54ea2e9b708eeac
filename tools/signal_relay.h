// SignalRelay: turns SIGCHLD, SIGINT and SIGTERM into bytes on a pipe (the self-pipe trick), so
// that the launcher's poll() loop wakes up for a child's exit or a Ctrl-C exactly as it does for
// output, and does the real work outside the signal handler.
//
//   PDIST_ASSIGN_OR_RETURN(std::unique_ptr<SignalRelay> relay, SignalRelay::Install(true));
//   pollfd p{relay->fd(), POLLIN, 0};  ...  for (int sig : relay->Drain()) ...
//
// While a relay lives it also ignores SIGPIPE (a reader of the launcher's output that goes away
// must not kill the launcher and orphan its children: the write fails with EPIPE instead). The
// destructor puts back every disposition it changed. Dispositions are process-wide, so only one
// relay may exist at a time; a second Install is FailedPrecondition.
#pragma once

#include <csignal>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"

namespace pdist::tools {

class SignalRelay {
 public:
  // relay_int_term: also catch SIGINT and SIGTERM (each only when not ignored already: a
  // launcher started with SIGINT ignored, as `nohup` or a background job of a script does, keeps
  // ignoring it, like any other program).
  static absl::StatusOr<std::unique_ptr<SignalRelay>> Install(bool relay_int_term);
  ~SignalRelay();
  SignalRelay(const SignalRelay&) = delete;
  SignalRelay& operator=(const SignalRelay&) = delete;

  // Readable once a signal has arrived.
  int fd() const { return read_fd_; }
  // The signals that arrived since the last call, in order (never blocks).
  std::vector<int> Drain();

 private:
  SignalRelay() = default;

  int read_fd_ = -1;
  int write_fd_ = -1;
  struct Saved {
    int signal;
    struct sigaction action;
  };
  std::vector<Saved> saved_;
};

}  // namespace pdist::tools
