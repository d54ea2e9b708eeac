// Predicted against measured: the planner's step time for strategies of a small GPT on 4
// in-process CPU ranks (this machine, calibrated by calibration/calibrate.h or read from a
// cluster file) next to the step time the engine measures for the same strategy file. Three
// tables — the parallelisms; ZeRO (hybrid too) and recompute in f32; the same in bf16 — each
// with the rank correlation (Spearman) and the mean relative error; scripts/bench-plan-cpu.sh
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

#include "benchmarks/measured_gpt.h"
#include "calibration/fixed_token_batch.h"
#include "engine/engine.h"
#include "ir/op_def.h"
#include "ir/serialize.h"
#include "calibration/calibrate.h"
#include "planner/estimate.h"
#include "planner/report.h"

namespace {

using pdist::planner::Candidate;
using pdist::passes::ScheduleMode;
using pdist::planner::Recompute;

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

// What one strategy's step measured: its median time, and where rank 0 spent one profiled step.
struct Measured {
  double step = NAN;     // seconds, median of the unprofiled steps
  double compute = NAN;  // rank 0's kernels that do not communicate (profiled step)
  double comm = NAN;     // rank 0's communicating kernels, waiting for peers included
};

Measured MeasureStep(const pdist::ir::Program& model, const std::string& strategy_json, int steps) {
  Measured m;
  pdist::engine::EngineOptions o;
  o.lr.base = 1e-4;
  o.strategy_json = strategy_json;
  auto engine = pdist::engine::Engine::Create(model.Clone(), o);
  o.profile = true;  // a second engine: timing every kernel slows the step it times
  auto profiled = pdist::engine::Engine::Create(model.Clone(), o);
  if (!engine.ok() || !profiled.ok()) {
    std::fprintf(stderr, "engine: %s\n", std::string((engine.ok() ? profiled : engine).status().message()).c_str());
    return m;
  }
  const pdist::exec::Feeds feeds = pdist::calibration::FixedTokenBatch(model);
  // Warm-up: the first steps run up to 3× slower while every rank's allocator grows.
  for (int s = 0; s < 3; ++s) (void)(*engine)->TrainStep(feeds);
  std::vector<double> seconds;
  for (int s = 0; s < steps; ++s) {
    const auto start = std::chrono::steady_clock::now();
    if (!(*engine)->TrainStep(feeds).ok()) return m;
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(seconds.begin(), seconds.end());
  m.step = seconds[seconds.size() / 2];
  (void)(*profiled)->TrainStep(feeds);
  auto r = (*profiled)->TrainStep(feeds);
  if (!r.ok()) return m;
  m.compute = m.comm = 0;
  for (const auto& [type, s] : r->op_seconds) {
    const pdist::ir::OpDef* def = pdist::ir::OpRegistry::Global().Find(type);
    (def != nullptr && def->communicates ? m.comm : m.compute) += s;
  }
  return m;
}

// One table: each strategy priced and measured, then the rank correlation and the mean error.
bool PrintTable(const char* title, const pdist::ir::Program& model, const pdist::strategy::Cluster& cluster,
                const std::vector<Candidate>& candidates, int steps) {
  absl::StatusOr<pdist::planner::PlannedModel> planned = pdist::planner::ModelFromProgram(model.Clone(), "gpt 4x128");
  if (!planned.ok()) {
    std::fprintf(stderr, "%s\n", std::string(planned.status().message()).c_str());
    return false;
  }
  pdist::planner::Profiler profiler(*planned, cluster);
  std::printf("%s\n%-34s %10s %10s %7s | %24s | %24s\n", title, "strategy", "predicted", "measured", "error",
              "predicted comp/comm/idle", "rank 0 comp/comm/other");
  std::vector<double> predicted, measured;
  for (const Candidate& c : candidates) {
    absl::StatusOr<pdist::planner::Estimate> e = pdist::planner::EstimateCandidate(c, *planned, cluster, profiler, {});
    if (!e.ok()) {
      std::fprintf(stderr, "%s: %s\n", c.ToString().c_str(), std::string(e.status().message()).c_str());
      return false;
    }
    const Measured m = MeasureStep(model, pdist::planner::PlanStrategyJson(*e), steps);
    predicted.push_back(e->step_time);
    measured.push_back(m.step);
    // Milliseconds side by side: the prediction's compute (with recompute), communication and
    // idle (bubble, core sharing); rank 0's kernel time in one profiled step and the rest of
    // the measured step (executor overhead, waiting outside collectives).
    const pdist::planner::TimeBreakdown& t = e->time;
    std::printf("%-34s %10.2f %10.2f %+6.0f%% | %7.2f %7.2f %8.2f | %7.2f %7.2f %8.2f\n", c.ToString().c_str(),
                1e3 * e->step_time, 1e3 * m.step, 100 * (e->step_time / m.step - 1), 1e3 * (t.compute + t.recompute),
                1e3 * (t.mp_comm + t.dp_comm + t.pp_comm), 1e3 * (t.bubble + t.core_sharing), 1e3 * m.compute,
                1e3 * m.comm, 1e3 * (m.step - m.compute - m.comm));
    std::fflush(stdout);
  }
  double error = 0;
  for (size_t i = 0; i < predicted.size(); ++i) error += std::abs(predicted[i] / measured[i] - 1);
  std::printf("spearman %.3f, mean |relative error| %.0f%% over %zu strategies (median of %d steps each)\n\n",
              Pearson(Ranks(predicted), Ranks(measured)), 100 * error / static_cast<double>(predicted.size()),
              predicted.size(), steps);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  absl::StatusOr<pdist::strategy::Cluster> cluster =
      argc > 1 ? pdist::strategy::ParseCluster(*pdist::ir::ReadFileToString(argv[1])) : pdist::calibration::CalibrateCpu(4);
  if (!cluster.ok()) {
    std::fprintf(stderr, "cluster: %s\n", std::string(cluster.status().message()).c_str());
    return 1;
  }
  const int steps = argc > 2 ? std::atoi(argv[2]) : 5;
  std::printf("cluster: %s\n", cluster->name.c_str());
  const std::vector<Candidate> parallelism = {
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
  // What trades time for memory: ZeRO (hybrid too) and recompute, priced by the same model.
  const std::vector<Candidate> memory_savers = {
      {.dp = 4, .zero = 1, .micro_batch = 4},
      {.dp = 4, .zero = 2, .micro_batch = 4},
      {.dp = 4, .zero = 3, .micro_batch = 4},
      {.dp = 4, .zero = 3, .zero_degree = 2, .micro_batch = 4},
      {.dp = 4, .micro_batch = 4, .recompute = Recompute::kSelective},
      {.dp = 4, .micro_batch = 4, .recompute = Recompute::kFull},
      {.dp = 2, .mp = 2, .sp = true, .micro_batch = 8, .recompute = Recompute::kSelective},
      {.dp = 2, .pp = 2, .zero = 1, .micro_batch = 4, .micro_batches = 2, .recompute = Recompute::kFull},
  };
  const pdist::ir::Program f32 = pdist::bench::MeasuredGpt(false), bf16 = pdist::bench::MeasuredGpt(true);
  const bool ok = PrintTable("parallelism, f32:", f32, *cluster, parallelism, steps) &&
                  PrintTable("ZeRO and recompute, f32:", f32, *cluster, memory_savers, steps) &&
                  PrintTable("ZeRO and recompute, bf16 (amp o2):", bf16, *cluster, memory_savers, steps);
  return ok ? 0 : 1;
}
