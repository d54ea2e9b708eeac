// What pdist-plan prints: the plan and why, as text for a person or one JSON object for a script.
//
//   plan: dp4 mp2 pp2 1F1B m8 b2 sp
//   predicted step 1.234 s  ·  26.6k tokens/s  ·  148 TFLOP/s per device  ·  MFU 47.4%
//   memory per device 61.2 GB of 72.0 GB usable (80.0 GB less 10%)
//     parameters 12.1  gradients 12.1  optimizer states 24.2  activations 11.3  workspace 1.5  (GB; at most
//     24.9 of gradients, activations and workspace at once)
//   step time   compute 1.020  recompute 0  tensor-parallel 0.101  data-parallel 0.012  pipeline p2p 0.004  bubble 0.097 (s)
//   searched 1415 candidates (38 simulated, 1377 cut by bounds), 49 profiles, 0.34 s
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "planner/search.h"
#include "strategy/cluster.h"

namespace pdist::planner {

std::string ReportText(const SearchResult& result, const strategy::Cluster& cluster);

// The `top` fastest plans side by side with how much slower each is than the pick, the leanest
// that did not fit with what they need, and the configurations that could not be built.
std::string ExplainText(const SearchResult& result, int64_t top);

// {"strategy": {...Strategy JSON...}, "step_time_s", "tokens_per_s", "tflops_per_device", "mfu",
//  "peak_memory_bytes", "memory_capacity_bytes", "time_s": {...},
//  "memory_bytes": {...}, "search": {...}, "top": [...], and what ExplainText says of the rest:
//  "layouts": [{"dp", "mp", "pp", "outcome": fits|slower|out_of_memory|not_built, ...}],
//  "out_of_memory": [the leanest that did not fit], "not_built": ["reason", ...]}
nlohmann::json ReportJson(const SearchResult& result, const strategy::Cluster& cluster, int64_t top);

// The picked plan's Strategy JSON (what pdist-train runs).
std::string PlanStrategyJson(const Estimate& plan);

}  // namespace pdist::planner
