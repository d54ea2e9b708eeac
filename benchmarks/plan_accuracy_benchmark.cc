// Predicted against measured: the planner's step time for strategies of a small GPT on 4
// in-process CPU ranks (this machine, calibrated by planner/calibrate.h or read from a cluster
// file) next to the step time the engine measures for the same strategy file. Prints a table
// and the rank correlation (Spearman) and mean relative error; scripts/bench-plan-accuracy.sh
// runs it for docs/benchmarks.md.
//
//   build/benchmarks/plan_accuracy_benchmark [CLUSTER.json] [STEPS]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "benchmarks/benchmark_batches.h"
#include "engine/engine.h"
#include "ir/models/gpt.h"
#include "ir/serialize.h"
#include "planner/calibrate.h"
#include "planner/estimate.h"
#include "planner/report.h"

namespace {

using pdist::planner::Candidate;
using pdist::passes::ScheduleMode;

pdist::ir::Program Model() {
  return *pdist::ir::models::BuildGpt(
      {.vocab = 256, .hidden = 128, .layers = 4, .heads = 4, .seq_len = 64, .batch = 16});
}

// Ranks of `v` (0 = smallest), ties averaged.
std::vector<double> Ranks(const std::vector<double>& v) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> ranks(v.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    for (size_t k = i; k <= j; ++k) ranks[order[k]] = (static_cast<double>(i) + static_cast<double>(j)) / 2;
    i = j + 1;
  }
  return ranks;
}

double Pearson(const std::vector<double>& x, const std::vector<double>& y) {
  const double n = static_cast<double>(x.size());
  const double mx = std::accumulate(x.begin(), x.end(), 0.0) / n, my = std::accumulate(y.begin(), y.end(), 0.0) / n;
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  return sxy / std::sqrt(sxx * syy);
}

double MeasuredStepSeconds(const pdist::ir::Program& model, const std::string& strategy_json, int steps) {
  pdist::engine::EngineOptions o;
  o.lr.base = 1e-4;
  o.strategy_json = strategy_json;
  auto engine = pdist::engine::Engine::Create(model.Clone(), o);
  if (!engine.ok()) {
    std::fprintf(stderr, "engine: %s\n", std::string(engine.status().message()).c_str());
    return NAN;
  }
  const pdist::exec::Feeds feeds = pdist::bench::FixedTokenBatch(model);
  (void)(*engine)->TrainStep(feeds);  // warm-up
  std::vector<double> seconds;
  for (int s = 0; s < steps; ++s) {
    const auto start = std::chrono::steady_clock::now();
    auto r = (*engine)->TrainStep(feeds);
    if (!r.ok()) return NAN;
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  absl::StatusOr<pdist::strategy::Cluster> cluster =
      argc > 1 ? pdist::strategy::ParseCluster(*pdist::ir::ReadFileToString(argv[1])) : pdist::planner::CalibrateCpu(4);
  if (!cluster.ok()) {
    std::fprintf(stderr, "cluster: %s\n", std::string(cluster.status().message()).c_str());
    return 1;
  }
  const int steps = argc > 2 ? std::atoi(argv[2]) : 5;
  const pdist::ir::Program model = Model();
  absl::StatusOr<pdist::planner::PlannedModel> planned = pdist::planner::ModelFromProgram(model.Clone(), "gpt 4x128");
  if (!planned.ok()) return 1;
  pdist::planner::Profiler profiler(*planned, *cluster);
  const std::vector<Candidate> candidates = {
      {.dp = 4, .micro_batch = 4},
      {.dp = 4, .micro_batch = 2, .micro_batches = 2},
      {.mp = 4, .micro_batch = 16},
      {.mp = 4, .sp = true, .micro_batch = 16},
      {.dp = 2, .mp = 2, .micro_batch = 8},
      {.dp = 2, .mp = 2, .sp = true, .micro_batch = 8},
      {.dp = 2, .pp = 2, .micro_batch = 4, .micro_batches = 2},
      {.dp = 2, .pp = 2, .micro_batch = 2, .micro_batches = 4, .schedule = ScheduleMode::kZBH1},
      {.dp = 2, .pp = 2, .vpp = 2, .micro_batch = 4, .micro_batches = 2, .schedule = ScheduleMode::kVPP},
      {.pp = 4, .micro_batch = 4, .micro_batches = 4},
      {.pp = 4, .micro_batch = 2, .micro_batches = 8, .schedule = ScheduleMode::kZBH1},
      {.mp = 2, .pp = 2, .micro_batch = 4, .micro_batches = 4},
  };
  std::printf("cluster: %s\n%-34s %12s %12s %8s\n", cluster->name.c_str(), "strategy", "predicted ms", "measured ms",
              "error");
  std::vector<double> predicted, measured;
  for (const Candidate& c : candidates) {
    absl::StatusOr<pdist::planner::Estimate> e =
        pdist::planner::EstimateCandidate(c, *planned, *cluster, profiler, {});
    if (!e.ok()) {
      std::fprintf(stderr, "%s: %s\n", c.ToString().c_str(), std::string(e.status().message()).c_str());
      return 1;
    }
    const double m = MeasuredStepSeconds(model, pdist::planner::PlanStrategyJson(*e), steps);
    predicted.push_back(e->step_time);
    measured.push_back(m);
    std::printf("%-34s %12.2f %12.2f %+7.0f%%\n", c.ToString().c_str(), 1e3 * e->step_time, 1e3 * m,
                100 * (e->step_time / m - 1));
    std::fflush(stdout);
  }
  double error = 0;
  for (size_t i = 0; i < predicted.size(); ++i) error += std::abs(predicted[i] / measured[i] - 1);
  std::printf("spearman %.3f, mean |relative error| %.0f%% over %zu strategies (median of %d steps each)\n",
              Pearson(Ranks(predicted), Ranks(measured)), 100 * error / static_cast<double>(predicted.size()),
              predicted.size(), steps);
  return 0;
}
