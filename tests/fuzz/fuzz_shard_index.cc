// libFuzzer target: untrusted text through the sharded-checkpoint index reader
// (engine/shard_index.h). Beyond "no crash": whatever decodes encodes again to text that decodes
// to the same index, and every piece it accepts lies inside its tensor and names a listed file.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "engine/shard_index.h"

namespace {

void Require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "fuzz_shard_index: property violated: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<pdist::engine::ShardIndex> index = pdist::engine::DecodeShardIndex(text, "fuzz");
  if (!index.ok()) return 0;
  for (const auto& [name, t] : index->tensors) {
    for (const pdist::engine::ShardPiece& p : t.pieces) {
      Require(p.file >= 0 && p.file < static_cast<int64_t>(index->files.size()), "a piece names a listed file");
      Require(p.box.offsets.size() == t.type.shape.size() && p.box.sizes.size() == t.type.shape.size(), "piece rank");
      for (size_t d = 0; d < t.type.shape.size(); ++d) {
        Require(p.box.offsets[d] + p.box.sizes[d] <= t.type.shape[d], "a piece lies inside its tensor");
      }
    }
  }
  absl::StatusOr<pdist::engine::ShardIndex> again =
      pdist::engine::DecodeShardIndex(pdist::engine::EncodeShardIndex(*index), "again");
  Require(again.ok(), "an encoded index decodes");
  Require(pdist::engine::EncodeShardIndex(*again) == pdist::engine::EncodeShardIndex(*index), "the round trip is exact");
  return 0;
}
