// Reading JSON that a user (or anyone) wrote: bounded, strict, and never a crash.
//
//   PDIST_ASSIGN_OR_RETURN(nlohmann::json j, ParseJson(text, "strategy"));
//   // "strategy: JSON nested deeper than 64 levels"
//   // "strategy: duplicate key 'dp_degree' in one object"
//
// nlohmann/json's own parser accepts any depth (a value nested 100k levels deep exhausts the
// stack when the tree is used) and lets the last of two equal keys win silently. This one builds
// the tree through the SAX interface, refusing input past the limits before it grows, and
// rejects duplicate keys. Every JSON reader of pdist (strategy, cluster, pdist-spmd requests,
// timelines) goes through it.
#pragma once

#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace pdist::ir {

struct JsonLimits {
  int64_t max_bytes = int64_t{64} << 20;  // of the text
  int64_t max_depth = 64;                 // nested arrays and objects
  int64_t max_values = int64_t{1} << 22;  // every value, keys not counted
};

// InvalidArgument starting with `what`: not JSON (with nlohmann's message: position and token),
// too large, too deep, too many values, or a key twice in one object.
absl::StatusOr<nlohmann::json> ParseJson(std::string_view text, std::string_view what, const JsonLimits& limits = {});

}  // namespace pdist::ir
