// PrefixedLines: line splitting and prefixed, whole-line writes.
#include "tools/prefixed_lines.h"

#include <unistd.h>

#include <cerrno>

namespace pdist::tools {

bool WriteFully(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

void PrefixedLines::WriteLine(std::string_view line) {
  if (!ok_) return;
  std::string out;
  out.reserve(prefix_.size() + line.size() + 1);
  out.append(prefix_).append(line).push_back('\n');
  ok_ = WriteFully(fd_, out);
}

void PrefixedLines::Feed(std::string_view bytes) {
  while (!bytes.empty()) {
    const size_t newline = bytes.find('\n');
    if (newline == std::string_view::npos) {
      pending_.append(bytes);
      break;
    }
    if (pending_.empty()) {
      WriteLine(bytes.substr(0, newline));  // the common case: no copy into pending_
    } else {
      pending_.append(bytes.substr(0, newline));
      WriteLine(pending_);
      pending_.clear();
    }
    bytes.remove_prefix(newline + 1);
  }
  while (pending_.size() >= kMaxLine) {
    WriteLine(std::string_view(pending_).substr(0, kMaxLine));
    pending_.erase(0, kMaxLine);
  }
}

void PrefixedLines::Finish() {
  if (!pending_.empty()) WriteLine(pending_);
  pending_.clear();
}

}  // namespace pdist::tools
