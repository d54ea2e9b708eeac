// The index of a sharded checkpoint (engine/sharded_checkpoint.h) on its own: JSON text ⇄ the
// tensors, their global types and their pieces, every field checked. Depends on the IR's types
// only, so that the fuzzer (tests/fuzz/fuzz_shard_index.cc) can drive it without the executor.
//
//   {"format": "pdist-sharded-checkpoint", "version": 1, "step": 120, "files": ["rank0.ckpt"],
//    "tensors": {"w": {"dtype": "f32", "shape": [4, 8], "dist_attr": "whole",
//                      "pieces": [{"file": 0, "offsets": [0, 0], "sizes": [4, 8], "bytes": [36, 155]}]}}}
//   ("bytes": [offset, size] of the piece's block in its file)
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/dist/local_slice.h"
#include "ir/types.h"

namespace pdist::engine {

struct ShardPiece {
  int64_t file = 0;    // index into ShardIndex::files
  ir::LocalSlice box;  // where the piece sits in the global tensor
  // Where the piece's block lies in its file (engine/checkpoint_format.h), so that a reader
  // takes only the pieces it needs; byte_offset -1: not recorded (indexes before 0.3: whole files).
  int64_t byte_offset = -1;
  int64_t byte_size = 0;
};

struct ShardedTensor {
  ir::TensorType type;    // global
  std::string dist_attr;  // as it was saved ("whole" without one): for people reading the index
  std::vector<ShardPiece> pieces;
};

struct ShardIndex {
  int64_t step = 0;
  std::vector<std::string> files;  // plain names in the checkpoint's directory
  std::map<std::string, ShardedTensor> tensors;
};

std::string EncodeShardIndex(const ShardIndex& index);

// Errors name `what` and the field: not an index, an unknown version, a step out of range, a file
// name with a '/', a dtype, a shape or a piece out of range (a piece outside its tensor, a file
// index past 'files'), a tensor over 2^40 elements.
absl::StatusOr<ShardIndex> DecodeShardIndex(std::string_view text, const std::string& what);

}  // namespace pdist::engine
