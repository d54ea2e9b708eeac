// Checkpoints: the persistent tensors of a training run (parameters and optimizer states) plus
// the step counter, in one self-describing binary file.
//
// Layout (little-endian): "PDISTCKP" | u32 version | u64 step | u64 count |
//   count × (u32 name_len | name | u8 dtype | u32 rank | rank × i64 dims | raw bytes)
// A file is written to PATH.tmp and renamed, so a crash never leaves a half-written checkpoint.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "executor/executor.h"

namespace pdist::engine {

struct Checkpoint {
  int64_t step = 0;
  exec::Workspace tensors;
};

absl::Status SaveCheckpoint(const Checkpoint& checkpoint, const std::string& path);
// Errors name the path and what is wrong (not a checkpoint, truncated, unknown version).
absl::StatusOr<Checkpoint> LoadCheckpoint(const std::string& path);

}  // namespace pdist::engine
