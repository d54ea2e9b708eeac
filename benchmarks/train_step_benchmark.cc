// One GPT training step against the GEMM rate Eigen reaches in the same process, and the
// executor's fixed cost per op.
//
//   build/train_step_benchmark --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//
// BM_Gemm reports the FLOP/s of the model's largest matmul shape ([b·s, h] × [h, 4h]);
// BM_GptTrainStep reports model FLOP/s with model FLOPs = 6·params·tokens + attention
// (12·layers·b·s²·h, fwd+bwd: Megatron-LM's count); scripts/bench-train-step.sh divides them.
// BM_TinyOps runs a program of 1000 scalar ops: its time per op is the executor's overhead.
#include <benchmark/benchmark.h>

#include <Eigen/Core>

#include "engine/engine.h"
#include "ir/builder.h"
#include "ir/models/gpt.h"

namespace {

using pdist::exec::Tensor;
using pdist::ir::DataType;

constexpr int64_t kLayers = 4, kHidden = 256, kHeads = 8, kSeq = 256, kBatch = 8, kVocab = 256;

pdist::ir::models::GptConfig BenchGpt() {
  pdist::ir::models::GptConfig c;
  c.vocab = kVocab;
  c.hidden = kHidden;
  c.layers = kLayers;
  c.heads = kHeads;
  c.seq_len = kSeq;
  c.batch = kBatch;
  return c;
}

void BM_Gemm(benchmark::State& state) {
  using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const int64_t m = kBatch * kSeq, k = kHidden, n = 4 * kHidden;
  Matrix a = Matrix::Random(m, k), b = Matrix::Random(k, n), c(m, n);
  for (auto _ : state) {
    c.noalias() = a * b;
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * m * n * k, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Gemm)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_GptTrainStep(benchmark::State& state) {
  const pdist::ir::models::GptConfig config = BenchGpt();
  auto program = pdist::ir::models::BuildGpt(config);
  if (!program.ok()) return state.SkipWithError(std::string(program.status().message()).c_str());
  pdist::engine::EngineOptions options;
  auto engine = pdist::engine::Engine::Create(std::move(*program), options);
  if (!engine.ok()) return state.SkipWithError(std::string(engine.status().message()).c_str());
  Tensor tokens = Tensor::Zeros({{kBatch, kSeq}, DataType::kInt64});
  for (int64_t i = 0; i < tokens.num_elements(); ++i) tokens.data<int64_t>()[i] = (i * 7) % kVocab;
  Tensor labels = Tensor::Zeros({{kBatch, kSeq}, DataType::kInt64});
  for (int64_t i = 0; i < labels.num_elements(); ++i) labels.data<int64_t>()[i] = (i * 7 + 7) % kVocab;
  const pdist::exec::Feeds feeds{{"tokens", tokens}, {"labels", labels}};
  if (auto warm = (*engine)->TrainStep(feeds); !warm.ok()) return state.SkipWithError("train step failed");
  for (auto _ : state) {
    auto r = (*engine)->TrainStep(feeds);
    benchmark::DoNotOptimize(r);
  }
  const double params = static_cast<double>(pdist::ir::models::GptParameterCount(config));
  const double tokens_per_step = static_cast<double>(kBatch * kSeq);
  const double attention = 12.0 * kLayers * kBatch * kSeq * kSeq * kHidden;
  state.counters["FLOP/s"] =
      benchmark::Counter(6.0 * params * tokens_per_step + attention, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["tokens/s"] = benchmark::Counter(tokens_per_step, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_GptTrainStep)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_TinyOps(benchmark::State& state) {
  constexpr int kOps = 1000;
  pdist::ir::Program program;
  pdist::ir::Builder b(&program);
  pdist::ir::Value* v = b.Data("x", {{1}, DataType::kFloat32});
  for (int i = 0; i < kOps; ++i) v = *b.Op1("scale", {v}, {{"scale", 1.0}, {"bias", 1.0}});
  program.set_loss(*b.Op1("sum", {v}));
  auto executor = pdist::exec::Executor::Create(program);
  if (!executor.ok()) return state.SkipWithError(std::string(executor.status().message()).c_str());
  pdist::exec::Workspace ws;
  const pdist::exec::Feeds feeds{{"x", Tensor::Zeros({{1}, DataType::kFloat32})}};
  for (auto _ : state) {
    auto r = executor->Run(feeds, ws);
    benchmark::DoNotOptimize(r);
  }
  state.counters["sec/op"] = benchmark::Counter(static_cast<double>(kOps + 1),
                                               benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_TinyOps)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
