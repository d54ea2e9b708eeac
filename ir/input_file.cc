// ReadFileToString / CheckReadableFile: stat first, so a directory or a missing path is named as
// such instead of surfacing as an empty read or a stream exception.
#include "ir/input_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "ir/status.h"

namespace pdist::ir {
namespace {

absl::Status ErrnoError(const std::string& path, int err) {
  switch (err) {
    case ENOENT: return absl::NotFoundError(absl::StrCat("'", path, "' does not exist"));
    case EACCES: return absl::PermissionDeniedError(absl::StrCat("'", path, "': permission denied"));
    case ENOTDIR: return absl::NotFoundError(absl::StrCat("'", path, "': a parent of it is not a directory"));
    default: return absl::InvalidArgumentError(absl::StrCat("cannot open '", path, "': ", std::strerror(err)));
  }
}

// The size of the regular file `path`.
absl::StatusOr<int64_t> RegularFileSize(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return ErrnoError(path, errno);
  if (S_ISDIR(st.st_mode)) return absl::InvalidArgumentError(absl::StrCat("'", path, "' is a directory, not a file"));
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is not a regular file (a device, socket or pipe)"));
  }
  return static_cast<int64_t>(st.st_size);
}

}  // namespace

absl::Status CheckReadableFile(const std::string& path) {
  PDIST_RETURN_IF_ERROR(RegularFileSize(path).status());
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoError(path, errno);
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path, int64_t max_bytes) {
  PDIST_ASSIGN_OR_RETURN(int64_t size, RegularFileSize(path));
  if (size > max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "' is ", size, " bytes, more than the limit of ", max_bytes));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoError(path, errno);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return absl::DataLossError(absl::StrCat("error reading '", path, "'"));
  return content;
}

absl::StatusOr<std::string> ReadFileRange(const std::string& path, int64_t offset, int64_t size) {
  if (offset < 0 || size < 0) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "': a read of ", size, " bytes at ", offset));
  }
  PDIST_ASSIGN_OR_RETURN(int64_t file_size, RegularFileSize(path));
  if (offset > file_size || size > file_size - offset) {
    return absl::DataLossError(absl::StrCat("'", path, "' is ", file_size, " bytes; bytes [", offset, ", ",
                                            offset + size, ") are past its end (a truncated file?)"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoError(path, errno);
  std::string bytes(static_cast<size_t>(size), '\0');
  in.seekg(offset);
  in.read(bytes.data(), size);
  if (in.gcount() != size) return absl::DataLossError(absl::StrCat("error reading '", path, "' at byte ", offset));
  return bytes;
}

}  // namespace pdist::ir
