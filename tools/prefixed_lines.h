// PrefixedLines: turns one child's byte stream into whole lines, each written to a shared fd
// with a prefix ("[rank 3] "), so that the output of many processes merged into one terminal
// or log never mixes two lines.
//
//   PrefixedLines out("[rank 1] ", STDOUT_FILENO);
//   out.Feed("hel");  out.Feed("lo\nwor");   // writes "[rank 1] hello\n"
//   out.Finish();                            // writes "[rank 1] wor\n" (the partial last line)
//
// Each line goes out in one write() call (looping only on a short write), so writers that share
// the fd from one thread never interleave mid-line. A line longer than kMaxLine is cut into
// pieces of kMaxLine bytes, each with its own prefix: a child that prints megabytes without a
// newline must not make the launcher buffer all of it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace pdist::tools {

class PrefixedLines {
 public:
  static constexpr size_t kMaxLine = 64 * 1024;

  PrefixedLines(std::string prefix, int fd) : prefix_(std::move(prefix)), fd_(fd) {}

  // Appends bytes; writes every line they complete.
  void Feed(std::string_view bytes);
  // At EOF: writes what is left (a last line without '\n') with a '\n' added.
  void Finish();

  // False once a write failed (EPIPE: the reader went away); later output is dropped, because
  // a launcher must keep supervising its children even when nobody reads their output.
  bool ok() const { return ok_; }

 private:
  void WriteLine(std::string_view line);

  std::string prefix_;
  int fd_;
  std::string pending_;  // bytes after the last '\n'
  bool ok_ = true;
};

// write() until all of `data` is out, retrying on EINTR; false on any other error.
bool WriteFully(int fd, std::string_view data);

}  // namespace pdist::tools
