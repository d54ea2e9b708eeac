// Predicted against measured memory: for a small GPT on 4 in-process CPU ranks, every
// combination of {dp, mp, pp} × ZeRO {0..3} × recompute {none, selective, full} × {f32, bf16},
// and hybrid ZeRO 1–3 over pairs of dp 4
// (bf16: the model through amp o2, as pdist-export --dtype bf16 writes it: bf16 parameters,
// f32 master weights and moments), the planner's memory per rank next to what the engine holds on its
// most loaded rank: parameters and optimizer states (the rank's persistent tensors), gradients
// and activations (each kind's own peak of live tensors, executor/run_state.h), and the peak of
// all live tensors. scripts/bench-memory.sh runs it for docs/benchmarks.md.
//
//   build/benchmarks/memory_benchmark
//
// Memory does not depend on the cluster's speeds: the preset only gives the planner its devices.
// Gradient buckets are 256 KiB here, engine and planner alike: the model's 3.4 MB of gradients
// against the default 25 MB bucket would put every gradient in one bucket that waits for the end
// of the backward, the opposite of a real model's regime (gigabytes of gradients, buckets issued
// all along the backward), and hide ZeRO 2's gradient saving.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <tuple>
#include <string>
#include <vector>

#include "ir/ops/merged_updates.h"
#include "benchmarks/measured_gpt.h"
#include "calibration/fixed_token_batch.h"
#include "engine/engine.h"
#include "planner/estimate.h"
#include "planner/report.h"

namespace {

using pdist::planner::Candidate;
using pdist::planner::Recompute;

constexpr int64_t kBucketBytes = 256 << 10;

struct RankMemory {
  double parameters = 0, optimizer_states = 0, gradients = 0, activations = 0, peak = 0;
  // ZeRO's own accounting (Rajbhandari et al. 2020): parameters + the gradients the update reads
  // + optimizer states, from the rank's program (the gradient peak above also holds gradients
  // in flight and buckets).
  double model_states = 0;
  double total() const { return parameters + optimizer_states + peak; }
};

// The rank that holds the most after a step (persistent tensors plus its peak of live ones).
absl::StatusOr<RankMemory> Measure(const pdist::ir::Program& model, const std::string& strategy_json) {
  pdist::engine::EngineOptions o;
  o.lr.base = 1e-4;
  o.strategy_json = strategy_json;
  o.gradient_bucket_bytes = kBucketBytes;
  absl::StatusOr<std::unique_ptr<pdist::engine::Engine>> engine = pdist::engine::Engine::Create(model.Clone(), o);
  if (!engine.ok()) return engine.status();
  const pdist::exec::Feeds feeds = pdist::calibration::FixedTokenBatch(model);
  absl::StatusOr<pdist::engine::StepResult> step = (*engine)->TrainStep(feeds);
  if (!step.ok()) return step.status();
  step = (*engine)->TrainStep(feeds);  // the second step: every state exists from the first
  if (!step.ok()) return step.status();
  RankMemory most;
  const auto& ranks = (*engine)->local_ranks();
  for (size_t k = 0; k < ranks.size(); ++k) {
    RankMemory m;
    for (const pdist::ir::Value* arg : ranks[k]->train_program().block().arguments()) {
      const double bytes = static_cast<double>(arg->type().num_bytes());
      if (arg->role() == pdist::ir::ValueRole::kParameter) m.parameters += bytes;
      if (arg->role() == pdist::ir::ValueRole::kOptimizerState) m.optimizer_states += bytes;
    }
    double update_gradients = 0;
    for (const auto& op : ranks[k]->train_program().block().ops()) {
      const bool update = pdist::ir::MergedUpdateOfBase(op->type()) != nullptr ||
                          pdist::ir::MergedUpdateOfMerged(op->type()) != nullptr;  // merged_* on GPUs
      if (!update) continue;
      for (const pdist::ir::Value* v : op->operands()) {
        if (v != nullptr && v->role() == pdist::ir::ValueRole::kGradient) update_gradients += static_cast<double>(v->type().num_bytes());
      }
    }
    m.model_states = m.parameters + update_gradients + m.optimizer_states;
    m.gradients = static_cast<double>(step->rank_peak_gradient_bytes[k]);
    m.activations = static_cast<double>(step->rank_peak_activation_bytes[k]);
    m.peak = static_cast<double>(step->rank_peak_bytes[k]);
    if (m.total() > most.total()) most = m;
  }
  return most;
}

std::vector<Candidate> Candidates() {
  struct Layout {
    int64_t dp, mp, pp, micro_batch, micro_batches;
  };
  const std::vector<Layout> layouts = {{4, 1, 1, 4, 1}, {1, 4, 1, 16, 1}, {1, 1, 4, 4, 4},
                                       {2, 2, 1, 8, 1}, {2, 1, 2, 4, 2},  {1, 2, 2, 4, 4}};
  std::vector<Candidate> out;
  for (const Layout& l : layouts) {
    for (int64_t zero = 0; zero <= (l.dp > 1 ? 3 : 0); ++zero) {
      for (Recompute rc : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
        out.push_back({.dp = l.dp, .mp = l.mp, .pp = l.pp, .zero = zero, .micro_batch = l.micro_batch,
                       .micro_batches = l.micro_batches, .recompute = rc});
      }
    }
  }
  // Hybrid ZeRO: the states over pairs of the 4 data-parallel ranks.
  for (int64_t zero = 1; zero <= 3; ++zero) {
    out.push_back({.dp = 4, .zero = zero, .zero_degree = 2, .micro_batch = 4, .micro_batches = 1});
  }
  // ZeRO 2 and 3 over two micro-batches: whole gradients summed, or each micro-batch's
  // reduce-scattered and the shards summed (sharding.accumulate_shards).
  for (int64_t zero = 2; zero <= 3; ++zero) {
    for (bool shards : {false, true}) {
      out.push_back({.dp = 4, .zero = zero, .accumulate_shards = shards, .micro_batch = 2, .micro_batches = 2});
    }
    out.push_back({.dp = 2, .pp = 2, .zero = zero, .accumulate_shards = true, .micro_batch = 4, .micro_batches = 2});
  }
  // Interleaved pipelines: model chunks of one layer, the first holding the embedding and the
  // last the head, so the chunks keep different amounts (planner/estimate.cc sums each's).
  for (const auto& [dp, mp, micro_batch] : {std::tuple<int64_t, int64_t, int64_t>{2, 1, 2}, {1, 2, 4}}) {
    for (Recompute rc : {Recompute::kNone, Recompute::kFull}) {
      out.push_back({.dp = dp, .mp = mp, .pp = 2, .vpp = 2, .micro_batch = micro_batch, .micro_batches = 4,
                     .schedule = pdist::passes::ScheduleMode::kVPP, .recompute = rc});
    }
  }
  // A split backward (ZBH1): W reads what B replayed, so recompute saves no memory (session 31's
  // user probe; the planner priced a saving until then).
  for (Recompute rc : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    out.push_back({.dp = 2, .pp = 2, .micro_batch = 2, .micro_batches = 4,
                   .schedule = pdist::passes::ScheduleMode::kZBH1, .recompute = rc});
  }
  return out;
}

double Kib(double bytes) { return bytes / 1024; }

}  // namespace

int main() {
  absl::StatusOr<pdist::strategy::Cluster> cluster = pdist::strategy::ClusterPreset("dgx-a100", 4);
  if (!cluster.ok()) {
    std::fprintf(stderr, "cluster: %s\n", std::string(cluster.status().message()).c_str());
    return 1;
  }
  std::printf("KiB per rank (the most loaded): predicted / measured\n%-42s %15s %15s %15s %15s %17s %7s\n", "strategy",
              "parameters", "gradients", "optimizer", "activations", "total", "error");
  double worst = 0;
  int rows = 0, within_10 = 0;
  for (const bool bf16 : {false, true}) {
  const pdist::ir::Program model = pdist::bench::MeasuredGpt(bf16);
  const char* precision = bf16 ? " bf16" : " f32";
  absl::StatusOr<pdist::planner::PlannedModel> planned = pdist::planner::ModelFromProgram(model.Clone(), "gpt 4x128");
  if (!planned.ok()) return 1;
  pdist::planner::Profiler profiler(*planned, *cluster);
  double unsharded = 0;  // parameters + gradients + optimizer states of dp without ZeRO
  for (const Candidate& c : Candidates()) {
    absl::StatusOr<pdist::planner::Estimate> e = pdist::planner::EstimateCandidate(
        c, *planned, *cluster, profiler, {.bucket_bytes = static_cast<double>(kBucketBytes)});
    if (!e.ok()) {
      std::fprintf(stderr, "%s: %s\n", c.ToString().c_str(), std::string(e.status().message()).c_str());
      return 1;
    }
    absl::StatusOr<RankMemory> m = Measure(model, pdist::planner::PlanStrategyJson(*e));
    if (!m.ok()) {
      std::fprintf(stderr, "%s: %s\n", c.ToString().c_str(), std::string(m.status().message()).c_str());
      return 1;
    }
    const pdist::planner::MemoryBreakdown& p = e->memory;
    // The planner's workspace is two gradient buckets in flight (with dp > 1), counted with the
    // gradients here as the executor counts them, plus what recompute replays at once, counted
    // with the activations.
    const double buckets = c.dp > 1 ? 2.0 * static_cast<double>(kBucketBytes) : 0.0;
    const double gradients = p.gradients + buckets;
    const double activations = p.activations + p.workspace - buckets;
    // The columns are each kind's own peak; the total is the planner's (less what the backward
    // frees before the gradients are whole, with one micro-batch).
    const double predicted = p.total();
    const double error = predicted / m->total() - 1;
    worst = std::max(worst, std::abs(error));
    ++rows;
    within_10 += std::abs(error) <= 0.10;
    std::printf("%-42s %7.0f/%7.0f %7.0f/%7.0f %7.0f/%7.0f %7.0f/%7.0f %8.0f/%8.0f %+6.0f%%\n", (c.ToString() + precision).c_str(),
                Kib(p.parameters), Kib(m->parameters), Kib(gradients), Kib(m->gradients), Kib(p.optimizer_states),
                Kib(m->optimizer_states), Kib(activations), Kib(m->activations), Kib(predicted), Kib(m->total()),
                100 * error);
    if (c.dp == 4 && c.zero == 0 && c.recompute == Recompute::kNone) unsharded = m->model_states;
    if (c.dp == 4 && c.recompute == Recompute::kNone && c.zero == 3 && unsharded > 0) {
      std::printf("  ZeRO-3 over %lld of dp 4: parameters + gradients read by the update + optimizer states %.0f KiB = %.3f of "
                  "the unsharded %.0f KiB\n",
                  static_cast<long long>(c.ShardRanks()), Kib(m->model_states), m->model_states / unsharded, Kib(unsharded));
    }
    std::fflush(stdout);
  }
  }
  std::printf("%d strategies; %d within 10%% of the measured total; largest |error| %.0f%%\n", rows, within_10, 100 * worst);
  return 0;
}
