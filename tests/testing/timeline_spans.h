// Spans for timeline tests: a compute job and a communication span.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "executor/timeline.h"

namespace pdist::testing {

inline exec::TimelineSpan Job(std::string name, std::string category, int64_t mb, double start, double end,
                              int64_t chunk = 0) {
  return {.name = std::move(name), .category = std::move(category), .track = exec::Track::kCompute,
          .micro_batch = mb, .chunk = chunk, .start_s = start, .end_s = end};
}

inline exec::TimelineSpan Comm(std::string name, double start, double end) {
  return {.name = std::move(name), .category = "comm", .track = exec::Track::kComm, .start_s = start, .end_s = end};
}

}  // namespace pdist::testing
