// Checks that a strategy (JSON text, possibly empty) can run on the single-rank engine.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace pdist::engine {

// Empty text is the default strategy. A strategy that needs more than one rank is
// Unimplemented here until multi-rank execution lands (partition, communicators).
absl::Status CheckSingleRankStrategy(const std::string& strategy_json);

}  // namespace pdist::engine
