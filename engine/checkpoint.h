// Checkpoints: the persistent tensors of a training run (parameters and optimizer states) plus
// the step counter, in one self-describing binary file that says when it is damaged.
//
// Layout (version 2, little-endian):
//   "PDISTCKP" | u32 version | u64 step | u64 count | u64 fnv(header so far)
//   count × block: u32 name_len | name | u8 dtype | u32 rank | rank × i64 dims | raw bytes
//                  | u64 fnv(the block so far)
//   nothing after the last block.
// Every field is checked before it is used: the step and the count against limits, each shape
// against the byte budget that is left, each block's checksum (a flipped byte is named with its
// tensor), names unique. Version 1 files (no checksums) still load.
//
// A file is written to PATH.tmp, flushed to disk (fsync), renamed over PATH, and the directory
// is synced, so a crash leaves either the old checkpoint or the new one; a PATH.tmp that a killed
// writer left behind is overwritten by the next save.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "engine/checkpoint_format.h"  // kMaxCheckpointStep, the format
#include "executor/executor.h"
#include "ir/output_file.h"

namespace pdist::engine {

struct Checkpoint {
  int64_t step = 0;
  exec::Workspace tensors;
};

absl::Status SaveCheckpoint(const Checkpoint& checkpoint, const std::string& path,
                            ir::Replace what = ir::Replace::kTarget);
// The error for checkpoint tensor `name`, which `program` holds no parameter or state of; where
// the name is a state of one of its parameters ("w.beta1_pow"), it says so: a checkpoint of
// another optimizer.
absl::Status UnknownCheckpointTensor(const std::string& source, const std::string& name, const ir::Program& program);

// A tensor the checkpoint holds as `saved` and the model as `model`: InvalidArgument naming both,
// with a hint where only the dtype differs (saved under another amp level or model dtype).
absl::Status CheckpointTypeMismatch(const std::string& source, const std::string& name, const ir::TensorType& saved,
                                    const ir::TensorType& model);
// Errors name the path and what is wrong (not a checkpoint, truncated, a checksum that does not
// match and in which tensor, an unknown version, a field out of range, trailing bytes). A
// directory is read as a sharded checkpoint (engine/sharded_checkpoint.h), every tensor whole.
absl::StatusOr<Checkpoint> LoadCheckpoint(const std::string& path);

}  // namespace pdist::engine
