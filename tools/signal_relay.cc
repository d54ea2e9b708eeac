// SignalRelay: the handler, installation and restoration of signal dispositions.
#include "tools/signal_relay.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace pdist::tools {
namespace {

// The handler can reach no object, only globals; an atomic int is lock-free, so reading it in a
// handler is async-signal-safe. -1 when no relay exists.
std::atomic<int> g_write_fd{-1};

void OnSignal(int signal) {
  const int saved_errno = errno;  // the interrupted code may be about to read errno
  const int fd = g_write_fd.load();
  if (fd >= 0) {
    const unsigned char byte = static_cast<unsigned char>(signal);
    // Non-blocking: with the pipe full (64 KiB of unread signals) a byte is dropped, which is
    // harmless: the loop reaps every child whenever it wakes, whatever woke it.
    [[maybe_unused]] const ssize_t n = ::write(fd, &byte, 1);
  }
  errno = saved_errno;
}

absl::Status Errno(const char* what) {
  return absl::InternalError(absl::StrCat("signal relay: ", what, ": ", std::strerror(errno)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<SignalRelay>> SignalRelay::Install(bool relay_int_term) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return Errno("pipe2");
  int expected = -1;
  if (!g_write_fd.compare_exchange_strong(expected, fds[1])) {
    ::close(fds[0]);
    ::close(fds[1]);
    return absl::FailedPreconditionError(
        "another launch is running in this process: signal handling is process-wide, so launches cannot overlap");
  }
  std::unique_ptr<SignalRelay> relay(new SignalRelay());
  relay->read_fd_ = fds[0];
  relay->write_fd_ = fds[1];

  struct sigaction relay_action = {};
  relay_action.sa_handler = OnSignal;
  sigemptyset(&relay_action.sa_mask);
  // SA_RESTART for the other threads of the process; poll() in the launcher returns EINTR anyway.
  // No SA_NOCLDSTOP: a stopped child wakes the loop needlessly but harmlessly.
  relay_action.sa_flags = SA_RESTART;
  struct sigaction ignore_action = {};
  ignore_action.sa_handler = SIG_IGN;
  sigemptyset(&ignore_action.sa_mask);

  auto replace = [&](int signal, const struct sigaction& action, bool unless_ignored) -> absl::Status {
    struct sigaction old = {};
    if (::sigaction(signal, nullptr, &old) != 0) return Errno("sigaction");
    if (unless_ignored && old.sa_handler == SIG_IGN) return absl::OkStatus();
    if (::sigaction(signal, &action, nullptr) != 0) return Errno("sigaction");
    relay->saved_.push_back({signal, old});
    return absl::OkStatus();
  };
  // SIGCHLD always: even where the process ignored it (which makes the kernel reap children
  // itself, so waitpid could never report their status).
  absl::Status status = replace(SIGCHLD, relay_action, /*unless_ignored=*/false);
  if (status.ok()) status = replace(SIGPIPE, ignore_action, false);
  if (status.ok() && relay_int_term) status = replace(SIGINT, relay_action, true);
  if (status.ok() && relay_int_term) status = replace(SIGTERM, relay_action, true);
  if (!status.ok()) return status;  // the destructor restores what was replaced
  return relay;
}

SignalRelay::~SignalRelay() {
  for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) ::sigaction(it->signal, &it->action, nullptr);
  g_write_fd.store(-1);
  ::close(read_fd_);
  ::close(write_fd_);
}

std::vector<int> SignalRelay::Drain() {
  std::vector<int> signals;
  unsigned char buffer[64];
  for (;;) {
    const ssize_t n = ::read(read_fd_, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EAGAIN: nothing more
    signals.insert(signals.end(), buffer, buffer + n);
  }
  return signals;
}

}  // namespace pdist::tools
