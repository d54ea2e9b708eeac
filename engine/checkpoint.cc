// Checkpoint (de)serialisation: checksummed blocks, validated fields, durable writes.
#include "engine/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "ir/checksum.h"
#include "ir/input_file.h"
#include "ir/status.h"
#include "ir/verifier.h"

namespace pdist::engine {
namespace {

constexpr char kMagic[8] = {'P', 'D', 'I', 'S', 'T', 'C', 'K', 'P'};
constexpr uint32_t kVersion = 2;
constexpr uint32_t kMaxNameBytes = 4096;
constexpr uint32_t kMaxRank = 16;

template <typename T>
void Put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

// Appends the checksum of out[from, end).
void Seal(std::string& out, size_t from) { Put<uint64_t>(out, ir::Fnv1a64(std::string_view(out).substr(from))); }

class Reader {
 public:
  Reader(const std::string& bytes, const std::string& path) : bytes_(bytes), path_(path) {}
  template <typename T>
  absl::Status Get(T& value) {
    return Bytes(&value, sizeof(T));
  }
  absl::Status Bytes(void* dst, size_t n) {
    if (n > remaining()) return Error(absl::StrCat("is truncated at byte ", pos_, " (needs ", n, " more)"));
    std::memcpy(dst, bytes_.data() + pos_, n);
    pos_ += n;
    return absl::OkStatus();
  }
  // Reads a stored checksum and compares it with that of bytes [from, here before the read).
  absl::Status Check(size_t from, const std::string& what) {
    const uint64_t want = ir::Fnv1a64(std::string_view(bytes_).substr(from, pos_ - from));
    uint64_t stored = 0;
    PDIST_RETURN_IF_ERROR(Get(stored));
    if (stored != want) return Error(absl::StrCat("is corrupted: the checksum of ", what, " does not match"));
    return absl::OkStatus();
  }
  absl::Status Error(const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint '", path_, "' ", what));
  }
  size_t pos() const { return pos_; }
  size_t remaining() const { return bytes_.size() - pos_; }

 private:
  const std::string& bytes_;
  const std::string& path_;
  size_t pos_ = 0;
};

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

// One tensor block; `checked` (version 2) reads and verifies its checksum.
absl::Status ReadBlock(Reader& r, bool checked, std::set<std::string>& names, Checkpoint& ckpt) {
  const size_t start = r.pos();
  uint32_t name_len = 0, rank = 0;
  uint8_t dtype = 0;
  PDIST_RETURN_IF_ERROR(r.Get(name_len));
  if (name_len == 0 || name_len > kMaxNameBytes) {
    return r.Error(absl::StrCat("has a tensor name of ", name_len, " bytes at byte ", start, " (1 to ", kMaxNameBytes,
                                " allowed)"));
  }
  std::string name(name_len, '\0');
  PDIST_RETURN_IF_ERROR(r.Bytes(name.data(), name_len));
  PDIST_RETURN_IF_ERROR(r.Get(dtype));
  PDIST_RETURN_IF_ERROR(r.Get(rank));
  if (dtype > static_cast<uint8_t>(ir::DataType::kBool) || rank > kMaxRank) {
    return r.Error(absl::StrCat("has a bad header for tensor '", name, "' (dtype code ", dtype, ", rank ", rank, ")"));
  }
  ir::TensorType type{ir::Shape(rank), static_cast<ir::DataType>(dtype)};
  for (uint32_t d = 0; d < rank; ++d) PDIST_RETURN_IF_ERROR(r.Get(type.shape[d]));
  if (absl::Status valid = ir::CheckTensorType(type); !valid.ok()) {
    return r.Error(absl::StrCat("has a bad shape for tensor '", name, "': ", valid.message()));
  }
  if (static_cast<uint64_t>(type.num_bytes()) > r.remaining()) {
    return r.Error(absl::StrCat("is truncated in tensor '", name, "' (", type.ToString(), " needs ", type.num_bytes(),
                                " bytes, ", r.remaining(), " are left)"));
  }
  exec::Tensor t = exec::Tensor::Empty(type);
  PDIST_RETURN_IF_ERROR(r.Bytes(t.raw(), static_cast<size_t>(type.num_bytes())));
  if (checked) PDIST_RETURN_IF_ERROR(r.Check(start, absl::StrCat("tensor '", name, "'")));
  if (!names.insert(name).second) return r.Error(absl::StrCat("holds tensor '", name, "' twice"));
  ckpt.tensors.emplace(std::move(name), std::move(t));
  return absl::OkStatus();
}

}  // namespace

absl::Status SaveCheckpoint(const Checkpoint& checkpoint, const std::string& path) {
  if (checkpoint.step < 0 || checkpoint.step > kMaxCheckpointStep) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint step ", checkpoint.step, " is outside [0, ",
                                                   kMaxCheckpointStep, "]"));
  }
  std::string out(kMagic, sizeof(kMagic));
  Put<uint32_t>(out, kVersion);
  Put<uint64_t>(out, static_cast<uint64_t>(checkpoint.step));
  Put<uint64_t>(out, checkpoint.tensors.size());
  Seal(out, 0);
  for (const auto& [name, t] : checkpoint.tensors) {
    const size_t start = out.size();
    Put<uint32_t>(out, static_cast<uint32_t>(name.size()));
    out += name;
    Put<uint8_t>(out, static_cast<uint8_t>(t.dtype()));
    Put<uint32_t>(out, static_cast<uint32_t>(t.shape().size()));
    for (int64_t d : t.shape()) Put<int64_t>(out, d);
    out.append(static_cast<const char*>(t.raw()), static_cast<size_t>(t.num_bytes()));
    Seal(out, start);
  }
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
  absl::StatusOr<std::string> read = ir::ReadFileToString(path, std::numeric_limits<int64_t>::max());
  if (!read.ok()) return WithContext(read.status(), "checkpoint");
  const std::string& bytes = *read;
  Reader r(bytes, path);
  char magic[8];
  if (!r.Bytes(magic, sizeof(magic)).ok() || std::memcmp(magic, kMagic, sizeof(kMagic)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is not a pdist checkpoint"));
  }
  uint32_t version = 0;
  uint64_t step = 0, count = 0;
  PDIST_RETURN_IF_ERROR(r.Get(version));
  if (version != 1 && version != kVersion) {
    return r.Error(absl::StrCat("has version ", version, "; this build reads versions 1 and ", kVersion));
  }
  const bool checked = version >= 2;
  PDIST_RETURN_IF_ERROR(r.Get(step));
  PDIST_RETURN_IF_ERROR(r.Get(count));
  if (checked) PDIST_RETURN_IF_ERROR(r.Check(0, "the header"));
  if (step > static_cast<uint64_t>(kMaxCheckpointStep)) {
    return r.Error(absl::StrCat("has step ", step, ", beyond the limit of ", kMaxCheckpointStep));
  }
  // Each block takes at least 4 + 1 + 1 + 4 bytes (+ 8 checked): more than that is a lie.
  if (count > r.remaining() / 10) return r.Error(absl::StrCat("claims ", count, " tensors in ", r.remaining(), " bytes"));
  Checkpoint ckpt;
  ckpt.step = static_cast<int64_t>(step);
  std::set<std::string> names;
  for (uint64_t i = 0; i < count; ++i) PDIST_RETURN_IF_ERROR(ReadBlock(r, checked, names, ckpt));
  if (r.remaining() != 0) return r.Error(absl::StrCat("has ", r.remaining(), " bytes after its last tensor"));
  return ckpt;
}

}  // namespace pdist::engine
