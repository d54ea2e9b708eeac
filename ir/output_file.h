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

// What an existing PATH that is not a plain file gets. kTarget, for a file a user named: a
// symbolic link's target is replaced (a loss log linked into a results folder), and a FIFO or
// device is written in place (/dev/stdout). kEntry, for the files of a directory that is itself
// the unit of commit (a checkpoint's index and rank files): the directory entry is replaced,
// whatever it is, so that saving into a directory of links to another checkpoint's files cannot
// rewrite that one, and a FIFO there cannot block the save.
enum class Replace { kTarget, kEntry };

// PATH.tmp written and flushed, renamed over PATH, PATH's directory synced.
absl::Status WriteFileAtomically(const std::string& path, std::string_view bytes, Replace what = Replace::kTarget);

// Removes what is at `path` when it is neither a regular file nor a directory (a symbolic link,
// a FIFO, a socket, a device): an entry a writer owns and is about to replace, where opening it
// would write through the link or block on the FIFO. Nothing there, or a file or a directory,
// is left as it is.
void RemoveSpecialEntry(const std::string& path);

// The checks WriteFileAtomically makes before writing, for a tool to make before hours of work
// whose result goes to `path`: not empty, not a directory, in a directory that exists.
absl::Status CheckOutputPath(const std::string& path);

}  // namespace pdist::ir
