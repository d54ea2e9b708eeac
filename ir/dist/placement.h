// Placement: how a tensor lies along one mesh dim — Shard(tensor_dim), Replicate() or
// Partial(reduce) — one per mesh dim, as in Paddle and PyTorch DTensor.
//
//   [Shard(0), Replicate()]  on mesh [2,2]  ≡  dims_mapping [0,-1] (rank-2 tensor)
//   [Replicate(), Partial(sum)]             ≡  dims_mapping [-1,-1], partial {1: sum}
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pdist::ir {

// How the partial values along a mesh dim combine into the full tensor.
enum class ReduceType : int8_t { kSum = 0, kAvg = 1, kMax = 2 };
const char* ReduceTypeName(ReduceType type);  // sum | avg | max
absl::StatusOr<ReduceType> ParseReduceType(const std::string& name);

struct Placement {
  enum class Kind : int8_t { kReplicate, kShard, kPartial };
  Kind kind = Kind::kReplicate;
  int64_t dim = -1;                      // the tensor dim, for kShard
  ReduceType reduce = ReduceType::kSum;  // for kPartial

  static Placement Shard(int64_t dim) { return {Kind::kShard, dim, ReduceType::kSum}; }
  static Placement Replicate() { return {}; }
  static Placement Partial(ReduceType reduce = ReduceType::kSum) { return {Kind::kPartial, -1, reduce}; }

  bool is_shard() const { return kind == Kind::kShard; }
  bool is_partial() const { return kind == Kind::kPartial; }
  bool is_replicate() const { return kind == Kind::kReplicate; }

  // "Shard(0)", "Replicate()", "Partial(sum)"; short forms "S(0)", "R", "P" parse too.
  std::string ToString() const;
  static absl::StatusOr<Placement> Parse(const std::string& text);

  friend bool operator==(const Placement&, const Placement&) = default;
};

// "[Shard(0), Replicate()]" — for messages.
std::string PlacementsToString(const std::vector<Placement>& placements);
// A comma-separated list, one placement per mesh dim (the C API's form); errors name the item.
//   ParsePlacements("Replicate(),Shard(1)")   // {Replicate(), Shard(1)}
absl::StatusOr<std::vector<Placement>> ParsePlacements(const std::string& text);

}  // namespace pdist::ir
