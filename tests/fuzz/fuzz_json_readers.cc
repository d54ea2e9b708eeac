// libFuzzer target: untrusted text through every JSON reader (the bounded parser, strategy files,
// cluster files, pdist-spmd requests). The first byte picks the reader, the rest is the input, so
// one corpus reaches all of them. Beyond "no crash": whatever a reader accepts, it writes back as JSON that it reads
// to the same value again.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "ir/json_reader.h"
#include "strategy/cluster.h"
#include "strategy/strategy.h"
#include "tools/spmd_json.h"

namespace {

void Require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "fuzz_json_readers: property violated: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0: {
      absl::StatusOr<nlohmann::json> j = pdist::ir::ParseJson(text, "fuzz", {.max_bytes = 1 << 16, .max_depth = 16});
      if (j.ok()) Require(pdist::ir::ParseJson(j->dump(), "again").ok(), "dumped JSON parses");
      break;
    }
    case 1: {
      absl::StatusOr<pdist::strategy::Strategy> s = pdist::strategy::ParseStrategy(text);
      // Choices fixed for the planner skip checks, never add one: what runs can be planned.
      absl::StatusOr<pdist::strategy::Strategy> given =
          pdist::strategy::ParseStrategy(text, pdist::strategy::StrategyKeys::kGivenOnly);
      if (!s.ok()) break;
      Require(given.ok(), "a strategy that parses also parses as the planner's fixed choices");
      const std::string written = pdist::strategy::StrategyToJson(*s);
      absl::StatusOr<pdist::strategy::Strategy> again = pdist::strategy::ParseStrategy(written);
      Require(again.ok(), "a written strategy parses");
      Require(pdist::strategy::StrategyToJson(*again) == written, "strategy write -> parse -> write is identical");
      break;
    }
    case 3: {
      // A request evaluates or answers {"error": ...}; only a bad top level is an error status.
      absl::StatusOr<nlohmann::json> out = pdist::tools::EvaluateSpmdText(text);
      if (out.ok()) Require(out->is_object() || out->is_array(), "pdist-spmd answers an object or a list");
      break;
    }
    default: {
      absl::StatusOr<pdist::strategy::Cluster> c = pdist::strategy::ParseCluster(text);
      if (!c.ok()) break;
      Require(pdist::strategy::ParseCluster(pdist::strategy::ClusterToJson(*c)).ok(), "a written cluster parses");
      break;
    }
  }
  return 0;
}
