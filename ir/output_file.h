// Writing a file a user named, whole or not at all: the bytes go to PATH.tmp, are flushed to the
// disk, and replace PATH by a rename, so a write that fails (a full disk, a killed process) leaves
// PATH as it was — the last good checkpoint, model or plan — and no PATH.tmp behind.
//
//   PDIST_RETURN_IF_ERROR(WriteFileAtomically("plan.json", json));
//   // InvalidArgument  "'out/' is a directory, not a file"
//   // Unavailable      "cannot write 'plan.json.tmp': No space left on device"
//   // Unavailable      "cannot rename 'plan.json.tmp' to 'plan.json': Permission denied"
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace pdist::ir {

// PATH.tmp written and flushed, renamed over PATH, PATH's directory synced.
absl::Status WriteFileAtomically(const std::string& path, std::string_view bytes);

// The checks WriteFileAtomically makes before writing, for a tool to make before hours of work
// whose result goes to `path`: not empty, not a directory, in a directory that exists.
absl::Status CheckOutputPath(const std::string& path);

}  // namespace pdist::ir
