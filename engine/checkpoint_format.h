// The checkpoint file format on its own (engine/checkpoint.h describes the layout): bytes ⇄
// named tensor records, every field checked. Depends on the IR's types only, so that the fuzzer
// (tests/fuzz/fuzz_checkpoint.cc) can drive it without the executor.
//
//   PDIST_ASSIGN_OR_RETURN(CheckpointContents c, DecodeCheckpoint(bytes, "run.ckpt"));
//   c.records[0].name, c.records[0].type, c.records[0].bytes   // views into `bytes`
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/types.h"

namespace pdist::engine {

// The largest step counter a checkpoint may hold (2^48: no run takes that many steps, and it
// keeps step × batch within an int64).
inline constexpr int64_t kMaxCheckpointStep = int64_t{1} << 48;

struct CheckpointRecord {
  std::string name;
  ir::TensorType type;
  std::string_view bytes;  // type.num_bytes() of them
};

struct CheckpointContents {
  int64_t step = 0;
  std::vector<CheckpointRecord> records;  // in file order, names unique
};

// Version 2 bytes, with checksums. InvalidArgument for a step outside [0, kMaxCheckpointStep].
absl::StatusOr<std::string> EncodeCheckpoint(int64_t step, const std::vector<CheckpointRecord>& records);

// Errors name `path` and what is wrong (not a checkpoint, truncated, a checksum that does not
// match and in which tensor, an unknown version, a field out of range, trailing bytes).
absl::StatusOr<CheckpointContents> DecodeCheckpoint(std::string_view bytes, const std::string& path);

// Reading one record without the rest of the file (sharded checkpoints: engine/shard_index.h
// gives each piece's byte range). A version-2 file is its header, then one block per record in
// the order EncodeCheckpoint was given them, each with its own checksum:
inline constexpr int64_t kCheckpointHeaderBytes = 8 + 4 + 8 + 8 + 8;  // magic, version, step, count, checksum
// The bytes of the block of record (`name`, `type`).
int64_t CheckpointBlockBytes(const std::string& name, const ir::TensorType& type);
// The step of a version-2 header (its first kCheckpointHeaderBytes bytes).
absl::StatusOr<int64_t> DecodeCheckpointHeader(std::string_view bytes, const std::string& path);
// Exactly one block, its checksum verified; the record's bytes are a view into `bytes`.
absl::StatusOr<CheckpointRecord> DecodeCheckpointBlock(std::string_view bytes, const std::string& path);

}  // namespace pdist::engine
