// Reading a file a user named: the error says what is wrong with the path, and a size limit keeps
// a wrong path (a device, a huge log) from being read into memory.
//
//   PDIST_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
//   // NotFound          "'plan.json' does not exist"
//   // InvalidArgument   "'out/' is a directory, not a file"
//   // PermissionDenied  "'/root/x.json': permission denied"
//   // InvalidArgument   "'huge.bin' is 5368709120 bytes, more than the limit of 1073741824"
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace pdist::ir {

inline constexpr int64_t kMaxInputFileBytes = int64_t{1} << 30;

// The whole file as bytes.
absl::StatusOr<std::string> ReadFileToString(const std::string& path, int64_t max_bytes = kMaxInputFileBytes);

// Bytes [offset, offset + size) of the file; DataLoss when the file ends before them (a
// truncated file). For readers that know where their record lies (sharded checkpoints).
absl::StatusOr<std::string> ReadFileRange(const std::string& path, int64_t offset, int64_t size);

// OK when `path` names a regular file this process can read; the errors above otherwise. For
// readers that stream a file instead of reading it whole (datasets, checkpoints).
absl::Status CheckReadableFile(const std::string& path);

}  // namespace pdist::ir
