// WriteFileAtomically: write(2) and fsync(2) on a temporary beside the target, then rename(2),
// which replaces the target in one step on a POSIX file system.
#include "ir/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "ir/status.h"

namespace pdist::ir {
namespace {

absl::Status WriteError(const std::string& action, const std::string& path, int err) {
  return absl::UnavailableError(absl::StrCat("cannot ", action, " '", path, "': ", std::strerror(err)));
}

// Writes all of `bytes` to `fd`; 0 or errno.
int WriteAll(int fd, std::string_view bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : ENOSPC;
    done += static_cast<size_t>(n);
  }
  return 0;
}

// Writes `bytes` to `path` and flushes them to the disk. Where the file was opened and a later
// step fails, it is removed (nothing half-written left behind); where it could not be opened,
// whatever is at `path` is not this call's to remove.
absl::Status WriteDurably(const std::string& path, std::string_view bytes) {
  // O_NOFOLLOW: the temporary is this call's own; a link there would be written through.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return WriteError("write", path, errno);
  auto fail = [&](const std::string& action, int err) {
    ::close(fd);
    ::unlink(path.c_str());
    return WriteError(action, path, err);
  };
  if (const int err = WriteAll(fd, bytes); err != 0) return fail("write", err);
  if (::fsync(fd) != 0) return fail("flush", errno);
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(path.c_str());
    return WriteError("close", path, err);
  }
  return absl::OkStatus();
}

// Makes a rename in `file`'s directory durable.
void SyncDirectoryOf(const std::string& file) {
  std::filesystem::path dir = std::filesystem::path(file).parent_path();
  if (dir.empty()) dir = ".";
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // best effort: the data itself is already synced
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

void RemoveSpecialEntry(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) ::unlink(path.c_str());
}

absl::Status CheckOutputPath(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("an empty output path");
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is a directory, not a file"));
  }
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) return absl::OkStatus();
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::NotFoundError(absl::StrCat("'", path, "': its directory '", dir.string(), "' does not exist"));
  }
  return absl::OkStatus();
}

namespace {

// Writes `bytes` to an existing file that is not a regular one (/dev/null, /dev/stdout, a FIFO):
// such a file cannot be replaced by a rename, and nothing there is lost by writing in place.
absl::Status WriteInPlace(const std::string& path, std::string_view bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return WriteError("write", path, errno);
  if (const int err = WriteAll(fd, bytes); err != 0) {
    ::close(fd);
    return WriteError("write", path, err);
  }
  if (::close(fd) != 0) return WriteError("close", path, errno);
  return absl::OkStatus();
}

// TARGET.tmp written durably and renamed over TARGET (a link at TARGET is replaced, not followed).
absl::Status WriteReplacing(const std::string& target, std::string_view bytes) {
  const std::string tmp = target + ".tmp";
  // The temporary is this call's own: a link or a FIFO left there is removed, not written through
  // or blocked on (a directory is not, and the write names it).
  RemoveSpecialEntry(tmp);
  PDIST_RETURN_IF_ERROR(WriteDurably(tmp, bytes));
  if (std::rename(tmp.c_str(), target.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return WriteError(absl::StrCat("rename '", tmp, "' to"), target, err);
  }
  SyncDirectoryOf(target);
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteFileAtomically(const std::string& path, std::string_view bytes, Replace what) {
  struct stat st {};
  // A link (to anything, a directory included) in a directory whose entries are replaced.
  if (what == Replace::kEntry && ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    return WriteReplacing(path, bytes);
  }
  // Checked first: renaming a file over a directory fails only after the temporary is written.
  PDIST_RETURN_IF_ERROR(CheckOutputPath(path));
  if (what == Replace::kEntry) return WriteReplacing(path, bytes);
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) return WriteInPlace(path, bytes);
  // A symbolic link is written through: its target replaced.
  std::string target = path;
  if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    std::error_code ec;
    target = std::filesystem::canonical(path, ec).string();
    if (ec) return WriteError("resolve", path, ec.value());
  }
  return WriteReplacing(target, bytes);
}

}  // namespace pdist::ir
