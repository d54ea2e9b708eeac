// Checkpoint files: durable writes of the format in engine/checkpoint_format.h, tensors in and out.
#include "engine/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>

#include "absl/strings/str_cat.h"
#include "engine/checkpoint_format.h"
#include "engine/sharded_checkpoint.h"
#include "ir/input_file.h"
#include "ir/status.h"

namespace pdist::engine {
namespace {

absl::Status WriteError(const std::string& action, const std::string& path, int err) {
  return absl::UnavailableError(absl::StrCat("cannot ", action, " '", path, "': ", std::strerror(err)));
}

// Writes `bytes` to `path` and flushes them to the disk.
absl::Status WriteDurably(const std::string& path, const std::string& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return WriteError("write checkpoint", path, errno);
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : ENOSPC;
      ::close(fd);
      return WriteError("write checkpoint", path, err);
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    return WriteError("flush checkpoint", path, err);
  }
  if (::close(fd) != 0) return WriteError("close checkpoint", path, errno);
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

absl::Status SaveCheckpoint(const Checkpoint& checkpoint, const std::string& path) {
  std::vector<CheckpointRecord> records;
  for (const auto& [name, t] : checkpoint.tensors) {
    records.push_back({name, t.type(), std::string_view(static_cast<const char*>(t.raw()),
                                                        static_cast<size_t>(t.num_bytes()))});
  }
  PDIST_ASSIGN_OR_RETURN(std::string out, EncodeCheckpoint(checkpoint.step, records));
  return WriteFileAtomically(path, out);
}

absl::Status WriteFileAtomically(const std::string& path, const std::string& out) {
  const std::string tmp = path + ".tmp";
  if (absl::Status written = WriteDurably(tmp, out); !written.ok()) {
    std::remove(tmp.c_str());  // no half-written file left behind
    return written;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    return WriteError(absl::StrCat("rename '", tmp, "' to"), path, err);
  }
  SyncDirectoryOf(path);
  return absl::OkStatus();
}

absl::StatusOr<Checkpoint> LoadCheckpoint(const std::string& path) {
  if (IsShardedCheckpoint(path)) return ReadShardedWhole(path);
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint '", path, "' is a directory without ", kShardIndexFile,
                                                   ": not a complete sharded checkpoint (a save that did not finish?)"));
  }
  absl::StatusOr<std::string> read = ir::ReadFileToString(path, std::numeric_limits<int64_t>::max());
  if (!read.ok()) return WithContext(read.status(), "checkpoint");
  PDIST_ASSIGN_OR_RETURN(CheckpointContents contents, DecodeCheckpoint(*read, path));
  Checkpoint ckpt;
  ckpt.step = contents.step;
  for (CheckpointRecord& record : contents.records) {
    exec::Tensor t = exec::Tensor::Empty(record.type);
    std::memcpy(t.raw(), record.bytes.data(), record.bytes.size());
    ckpt.tensors.emplace(std::move(record.name), std::move(t));
  }
  return ckpt;
}

}  // namespace pdist::engine
