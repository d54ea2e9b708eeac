// The completion pass on a 96-layer GPT training program (forward, backward, adamw) with
// Megatron-style annotations on a [dp=2, mp=2] mesh, reshard insertion included.
//
//   build/benchmarks/completion_benchmark --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//
// Each iteration completes a fresh copy of the annotated program (the copy is not timed). The
// shapes are small — completion's work depends on the number of ops and values, not on tensor
// sizes. Counters: ops and values of the completed program, reshards inserted, rounds.
#include <benchmark/benchmark.h>

#include "ir/models/gpt.h"
#include "passes/annotate.h"
#include "passes/autodiff.h"
#include "passes/completion.h"
#include "passes/optimizer.h"
#include "strategy/presets.h"

namespace {

using pdist::ir::Program;

absl::StatusOr<Program> AnnotatedGpt(int64_t layers) {
  pdist::ir::models::GptConfig config;
  config.vocab = 256;
  config.hidden = 64;
  config.heads = 4;
  config.layers = layers;
  config.seq_len = 32;
  config.batch = 8;
  absl::StatusOr<Program> program = pdist::ir::models::BuildGpt(config);
  if (!program.ok()) return program.status();
  pdist::strategy::Strategy strategy;
  strategy.dp_degree = 2;
  strategy.mp_degree = 2;
  strategy.annotations =
      pdist::strategy::MegatronGptAnnotations(pdist::ir::ProcessMesh::Range({2, 2}, {"dp", "mp"}));
  for (absl::Status s : {pdist::passes::ApplyAnnotations(strategy, *program),
                         pdist::passes::AppendBackward(*program, program->loss()),
                         pdist::passes::AppendOptimizer(*program, {})}) {
    if (!s.ok()) return s;
  }
  return program;
}

void BM_CompleteGpt(benchmark::State& state) {
  absl::StatusOr<Program> annotated = AnnotatedGpt(state.range(0));
  if (!annotated.ok()) return state.SkipWithError(std::string(annotated.status().message()).c_str());
  pdist::passes::CompletionReport report;
  int64_t ops = 0, values = 0;
  for (auto _ : state) {
    state.PauseTiming();
    Program program = annotated->Clone();
    state.ResumeTiming();
    absl::StatusOr<pdist::passes::CompletionReport> done = pdist::passes::CompleteDistAttrs(program);
    if (!done.ok()) return state.SkipWithError(std::string(done.status().message()).c_str());
    report = *done;
    state.PauseTiming();
    ops = static_cast<int64_t>(program.block().ops().size());
    values = program.num_values();
    program = Program();  // freed outside the timed region
    state.ResumeTiming();
  }
  state.counters["ops"] = static_cast<double>(ops);
  state.counters["values"] = static_cast<double>(values);
  state.counters["reshards"] = static_cast<double>(report.reshards);
  state.counters["rounds"] = report.rounds;
}
BENCHMARK(BM_CompleteGpt)->Arg(96)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
