// Training step of a GPT on in-process ranks against one rank, with the communication stream
// on and off: what 2 ranks cost on this machine and how much of their communication the
// overlap hides.
//
//   build/benchmarks/distributed_step_benchmark --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//
// Arguments: (layout, overlap): layout 0 = one rank, 1 = dp2, 2 = mp2 (Megatron, vocab-parallel);
// overlap 1 = collectives on the communication stream with 25 MiB gradient buckets, 0 = every
// op in turn and one all-reduce per gradient. Counter comm_s is the time rank 0 spends inside
// communicating kernels per step, measured in a profiled run without overlap (so it is the
// communication the overlap could hide); scripts/bench-distributed.sh turns the medians into
// the table of docs/benchmarks.md.
#include <benchmark/benchmark.h>

#include "calibration/fixed_token_batch.h"
#include "engine/engine.h"
#include "ir/models/gpt.h"

namespace {

using pdist::engine::Engine;
using pdist::engine::EngineOptions;

pdist::ir::Program Model() {
  pdist::ir::models::GptConfig c;
  c.vocab = 256;
  c.hidden = 256;
  c.layers = 2;
  c.heads = 8;
  c.seq_len = 128;
  c.batch = 8;
  return *pdist::ir::models::BuildGpt(c);
}


EngineOptions Options(int64_t layout, bool overlap, bool profile) {
  EngineOptions o;
  o.lr.base = 1e-4;
  if (layout == 1) o.strategy_json = R"({"dp_degree": 2})";
  if (layout == 2) o.strategy_json = R"({"mp_degree": 2})";
  o.overlap_communication = overlap;
  o.gradient_bucket_bytes = overlap ? int64_t{25} << 20 : 0;
  o.profile = profile;
  return o;
}

// Seconds per step inside communicating kernels on rank 0 (a profiled, non-overlapped run).
double CommSecondsPerStep(int64_t layout) {
  if (layout == 0) return 0;
  const pdist::ir::Program model = Model();
  auto engine = Engine::Create(model.Clone(), Options(layout, false, true));
  const pdist::exec::Feeds feeds = pdist::calibration::FixedTokenBatch(model);
  double total = 0;
  const int steps = 3;
  for (int s = 0; s <= steps; ++s) {
    auto r = (*engine)->TrainStep(feeds);
    if (!r.ok() || s == 0) continue;  // the first step warms up
    for (const auto& [type, seconds] : r->op_seconds) {
      if (type.rfind("c_", 0) == 0) total += seconds;
    }
  }
  return total / steps;
}

void BM_DistributedStep(benchmark::State& state) {
  const int64_t layout = state.range(0);
  const bool overlap = state.range(1) != 0;
  const pdist::ir::Program model = Model();
  auto engine = Engine::Create(model.Clone(), Options(layout, overlap, false));
  if (!engine.ok()) {
    state.SkipWithError(std::string(engine.status().message()).c_str());
    return;
  }
  const pdist::exec::Feeds feeds = pdist::calibration::FixedTokenBatch(model);
  (void)(*engine)->TrainStep(feeds);  // warm-up
  for (auto _ : state) {
    auto r = (*engine)->TrainStep(feeds);
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      return;
    }
  }
  state.counters["comm_s"] = CommSecondsPerStep(layout);
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(8 * 128), benchmark::Counter::kIsIterationInvariantRate);
}

BENCHMARK(BM_DistributedStep)
    ->ArgNames({"layout", "overlap"})
    ->Args({0, 1})
    ->Args({1, 0})
    ->Args({1, 1})
    ->Args({2, 0})
    ->Args({2, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(2.0);

}  // namespace

BENCHMARK_MAIN();
