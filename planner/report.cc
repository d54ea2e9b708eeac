#include "planner/report.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "strategy/strategy.h"

namespace pdist::planner {
namespace {

constexpr double kGB = 1e9;

nlohmann::json TimeJson(const TimeBreakdown& t) {
  return {{"compute", t.compute}, {"recompute", t.recompute}, {"tensor_parallel", t.mp_comm},
          {"data_parallel", t.dp_comm}, {"pipeline_p2p", t.pp_comm}, {"bubble", t.bubble},
          {"core_sharing", t.core_sharing}};
}

nlohmann::json MemoryJson(const MemoryBreakdown& m) {
  return {{"parameters", m.parameters}, {"gradients", m.gradients}, {"optimizer_states", m.optimizer_states},
          {"activations", m.activations}, {"workspace", m.workspace}, {"transient_peak", m.transient()}};
}

nlohmann::json CandidateJson(const Estimate& e) {
  return {{"plan", e.candidate.ToString()}, {"step_time_s", e.step_time}, {"mfu", e.mfu},
          {"peak_memory_bytes", e.memory.total()}};
}

}  // namespace

std::string PlanStrategyJson(const Estimate& plan) {
  return strategy::StrategyToJson(plan.candidate.ToStrategy(plan.split_before));
}

std::string ReportText(const SearchResult& r, const strategy::Cluster& cluster) {
  const Estimate& e = r.best();
  const MemoryBreakdown& m = e.memory;
  const TimeBreakdown& t = e.time;
  std::string out = absl::StrFormat("plan: %s\n", e.candidate.ToString());
  absl::StrAppendFormat(&out, "predicted step %.4g s  ·  %.4g tokens/s  ·  %.4g TFLOP/s per device  ·  MFU %.1f%%\n",
                        e.step_time, e.tokens_per_s, e.tflops_per_device, 100 * e.mfu);
  absl::StrAppendFormat(&out, "memory per device %.3g GB of %.3g GB usable (%.3g GB less the margin)\n", m.total() / kGB,
                        e.capacity / kGB, cluster.device.memory / kGB);
  absl::StrAppend(&out, "  ", m.ToString(), "\n");
  absl::StrAppendFormat(&out,
                        "step time  compute %.4g  recompute %.4g  tensor-parallel %.4g  data-parallel %.4g  "
                        "pipeline p2p %.4g  bubble %.4g%s (s)\n",
                        t.compute, t.recompute, t.mp_comm, t.dp_comm, t.pp_comm, t.bubble,
                        t.core_sharing > 0 ? absl::StrFormat("  waiting for shared cores %.4g", t.core_sharing) : "");
  if (!e.split_before.empty()) {
    absl::StrAppend(&out, "stages start at ", absl::StrJoin(e.split_before, ", "), "\n");
  }
  absl::StrAppendFormat(&out, "searched %d candidate%s (%d simulated, %d cut by bounds), %d profile%s, %.3g s on %s\n",
                        r.candidates, r.candidates == 1 ? "" : "s", r.simulated, r.pruned, r.programs_profiled,
                        r.programs_profiled == 1 ? "" : "s", r.seconds, cluster.name);
  return out;
}

std::string ExplainText(const SearchResult& r, int64_t top) {
  const double best = r.best().step_time;
  double fastest = best;  // the pick is the simplest plan within the tie tolerance of this one
  for (const Estimate& e : r.ranked) fastest = std::min(fastest, e.step_time);
  std::string out = absl::StrFormat("%-3s %-42s %12s %9s %7s %10s\n", "#", "plan", "step (s)", "vs pick", "MFU",
                                    "mem (GB)");
  for (int64_t i = 0; i < std::min<int64_t>(top, static_cast<int64_t>(r.ranked.size())); ++i) {
    const Estimate& e = r.ranked[i];
    absl::StrAppendFormat(&out, "%-3d %-42s %12.5g %8.1f%% %6.1f%% %10.3g\n", i + 1, e.candidate.ToString(),
                          e.step_time, 100 * (e.step_time / best - 1), 100 * e.mfu, e.memory.total() / kGB);
  }
  if (r.ranked.size() > 1 && r.ranked[0].step_time > r.ranked[1].step_time) {
    absl::StrAppendFormat(&out, "(the pick is within the tie tolerance of faster plans and simpler than them)\n");
  }
  if (!r.too_big.empty()) {
    absl::StrAppend(&out, "out of memory (the leanest):\n");
    for (size_t i = 0; i < std::min<size_t>(5, r.too_big.size()); ++i) {
      const Estimate& e = r.too_big[i];
      absl::StrAppendFormat(&out, "    %-42s needs %s%.3g GB, %.3g GB usable\n", e.candidate.ToString(),
                            e.simulated ? "" : "at least ", e.memory.total() / kGB, e.capacity / kGB);
    }
  }
  absl::StrAppendFormat(&out, "%d candidates were cut without simulating: slower than the pick or out of memory by a bound\n",
                        r.pruned);
  absl::StrAppend(&out, "by layout (dp × mp × pp):\n");
  for (const LayoutOutcome& l : r.layouts) {
    const std::string name = absl::StrFormat("    dp%d mp%d pp%d", l.dp, l.mp, l.pp);
    if (l.best) {
      absl::StrAppendFormat(&out, "%-20s best %-34s %.5g s (%+.1f%%)\n", name, l.best->candidate.ToString(),
                            l.best->step_time, 100 * (l.best->step_time / best - 1));
    } else if (l.slower_bound > 0) {
      // Cut against the fastest plan and the tie tolerance, which a pick within it does not show.
      const std::string against_fastest =
          fastest < best ? absl::StrFormat("; %+.1f%% of the fastest", 100 * (l.slower_bound / fastest - 1)) : "";
      absl::StrAppendFormat(&out, "%-20s slower: its busiest rank alone works at least %.5g s (%+.1f%%%s)\n", name,
                            l.slower_bound, 100 * (l.slower_bound / best - 1), against_fastest);
    } else if (l.leanest) {
      absl::StrAppendFormat(&out, "%-20s out of memory: the leanest, %s, needs %s%.3g GB of %.3g\n", name,
                            l.leanest->candidate.ToString(), l.leanest->simulated ? "" : "at least ",
                            l.leanest->memory.total() / kGB, l.leanest->capacity / kGB);
    } else {
      absl::StrAppendFormat(&out, "%-20s not built: %s\n", name, l.not_built);
    }
  }
  for (const std::string& s : r.skipped) absl::StrAppend(&out, "not built: ", s, "\n");
  return out;
}

nlohmann::json ReportJson(const SearchResult& r, const strategy::Cluster& cluster, int64_t top) {
  const Estimate& e = r.best();
  nlohmann::json j = {
      {"plan", e.candidate.ToString()},
      {"strategy", nlohmann::json::parse(PlanStrategyJson(e))},
      {"step_time_s", e.step_time},
      {"tokens_per_s", e.tokens_per_s},
      {"tflops_per_device", e.tflops_per_device},
      {"mfu", e.mfu},
      {"peak_memory_bytes", e.memory.total()},
      {"memory_capacity_bytes", cluster.device.memory},
      {"memory_usable_bytes", e.capacity},
      {"time_s", TimeJson(e.time)},
      {"memory_bytes", MemoryJson(e.memory)},
      {"model_flops_per_step", r.model_flops_per_step},
      {"search",
       {{"candidates", r.candidates}, {"simulated", r.simulated}, {"pruned", r.pruned},
        {"profiles", r.programs_profiled}, {"seconds", r.seconds}}},
  };
  j["top"] = nlohmann::json::array();
  for (int64_t i = 0; i < std::min<int64_t>(top, static_cast<int64_t>(r.ranked.size())); ++i) {
    j["top"].push_back(CandidateJson(r.ranked[i]));
  }
  // What --explain says of the others, as data (--json dropped it).
  j["layouts"] = nlohmann::json::array();
  for (const LayoutOutcome& l : r.layouts) {
    nlohmann::json layout = {{"dp", l.dp}, {"mp", l.mp}, {"pp", l.pp}};
    if (l.best) {
      layout["outcome"] = "fits";
      layout["best"] = CandidateJson(*l.best);
    } else if (l.slower_bound > 0) {
      layout["outcome"] = "slower";
      layout["busiest_rank_s"] = l.slower_bound;
    } else if (l.leanest) {
      layout["outcome"] = "out_of_memory";
      layout["leanest"] = CandidateJson(*l.leanest);
    } else {
      layout["outcome"] = "not_built";
      layout["reason"] = l.not_built;
    }
    j["layouts"].push_back(std::move(layout));
  }
  j["out_of_memory"] = nlohmann::json::array();
  for (size_t i = 0; i < std::min<size_t>(5, r.too_big.size()); ++i) j["out_of_memory"].push_back(CandidateJson(r.too_big[i]));
  j["not_built"] = r.skipped;
  return j;
}

}  // namespace pdist::planner
