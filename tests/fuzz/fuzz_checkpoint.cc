// libFuzzer target: untrusted bytes through the checkpoint decoder (engine/checkpoint_format.h).
// Checksums reject nearly every mutation of a version-2 file, which is their point; so each input
// is also read with its version patched to 1 (no checksums), to reach the checks of the step,
// the count, names, dtypes and shapes. Beyond "no crash": whatever decodes encodes again to
// bytes that decode to the same records, each block also alone at the offset the block sizes
// give (sharded checkpoints read blocks so).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "engine/checkpoint_format.h"

namespace {

void Require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "fuzz_checkpoint: property violated: %s\n", what);
    std::abort();
  }
}

// A version-2 file's blocks lie where CheckpointBlockBytes says (sharded checkpoints read them
// one by one from the offsets their index computes this way), each decoding alone.
void CheckBlockLayout(const std::string& bytes, const pdist::engine::CheckpointContents& c) {
  Require(pdist::engine::DecodeCheckpointHeader(bytes.substr(0, pdist::engine::kCheckpointHeaderBytes), "header").ok(),
          "a version-2 header decodes alone");
  int64_t offset = pdist::engine::kCheckpointHeaderBytes;
  for (const pdist::engine::CheckpointRecord& r : c.records) {
    const int64_t size = pdist::engine::CheckpointBlockBytes(r.name, r.type);
    Require(offset + size <= static_cast<int64_t>(bytes.size()), "blocks lie inside the file");
    auto block = pdist::engine::DecodeCheckpointBlock(std::string_view(bytes).substr(offset, size), "block");
    Require(block.ok() && block->name == r.name && block->type == r.type && block->bytes == r.bytes,
            "each block decodes alone to its record");
    offset += size;
  }
  Require(offset == static_cast<int64_t>(bytes.size()), "the blocks end the file");
}

void CheckRoundTrip(const pdist::engine::CheckpointContents& c) {
  absl::StatusOr<std::string> bytes = pdist::engine::EncodeCheckpoint(c.step, c.records);
  Require(bytes.ok(), "a decoded checkpoint encodes");
  absl::StatusOr<pdist::engine::CheckpointContents> again = pdist::engine::DecodeCheckpoint(*bytes, "again");
  Require(again.ok(), "an encoded checkpoint decodes");
  Require(again->step == c.step && again->records.size() == c.records.size(), "step and count survive");
  CheckBlockLayout(*bytes, *again);  // what EncodeCheckpoint writes is version 2
  for (size_t i = 0; i < c.records.size(); ++i) {
    Require(again->records[i].name == c.records[i].name && again->records[i].type == c.records[i].type &&
                again->records[i].bytes == c.records[i].bytes,
            "every record survives");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string input(reinterpret_cast<const char*>(data), size);
  if (auto c = pdist::engine::DecodeCheckpoint(input, "fuzz"); c.ok()) CheckRoundTrip(*c);
  (void)pdist::engine::DecodeCheckpointHeader(input, "fuzz-header");
  (void)pdist::engine::DecodeCheckpointBlock(input, "fuzz-block");
  if (input.size() >= 12) {
    const uint32_t one = 1;
    std::memcpy(input.data() + 8, &one, sizeof(one));  // version 1: no checksums to stop a mutation
    if (auto c = pdist::engine::DecodeCheckpoint(input, "fuzz-v1"); c.ok()) CheckRoundTrip(*c);
  }
  return 0;
}
