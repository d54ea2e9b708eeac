// Pipeline schedules on two in-process stages (one core each on a 2-core machine): step time,
// peak memory per stage and measured bubble of FThenB, 1F1B, ZBH1 and VPP on the same model and
// micro-batch count.
//
//   build/benchmarks/pipeline_schedule_benchmark --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//
// Argument: schedule 0 = FThenB, 1 = 1F1B, 2 = ZBH1, 3 = VPP (2 chunks per stage). Counters, per
// stage s: peak_s (MiB, the executor's live-tensor peak of the step), act_s (MiB, that peak
// less the stage's gradient sums, which are as large as its parameters: the activations in
// flight), bubble_s (measured: 1 - busy / step over the job spans less their waits, median of 7
// recorded steps) and
// bubble_theory (the schedule simulator with F = 1, B = 2, split 1 + 1).
// scripts/bench-pipeline.sh turns the medians into the table of docs/benchmarks.md.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "calibration/fixed_token_batch.h"
#include "engine/engine.h"
#include "executor/timeline.h"
#include "ir/models/gpt.h"
#include "passes/pipeline_schedule.h"

namespace {

using pdist::engine::Engine;
using pdist::engine::EngineOptions;
using pdist::passes::ScheduleMode;

constexpr int64_t kStages = 2;
constexpr int64_t kMicroBatches = 8;
constexpr ScheduleMode kModes[] = {ScheduleMode::kFThenB, ScheduleMode::k1F1B, ScheduleMode::kZBH1, ScheduleMode::kVPP};

pdist::ir::Program Model() {
  pdist::ir::models::GptConfig c;
  c.vocab = 256;
  c.hidden = 64;
  c.layers = 8;
  c.heads = 4;
  c.seq_len = 64;
  c.batch = 32;  // 8 micro-batches of 4: activations outweigh the parameters
  return *pdist::ir::models::BuildGpt(c);
}


EngineOptions Options(ScheduleMode mode, const std::string& timeline_dir) {
  EngineOptions o;
  o.lr.base = 1e-4;
  const int64_t chunks = mode == ScheduleMode::kVPP ? 2 : 1;
  o.strategy_json = absl::StrCat(R"({"pp_degree": )", kStages, R"(, "pipeline": {"schedule_mode": ")",
                                 pdist::passes::ScheduleModeName(mode), R"(", "accumulate_steps": )", kMicroBatches,
                                 R"(, "vpp_degree": )", chunks, "}}");
  o.timeline_dir = timeline_dir;
  return o;
}

// Bytes of the trainable parameters a rank holds: its gradient sums are as large.
int64_t ParameterBytes(const pdist::engine::RankRunner& runner) {
  int64_t bytes = 0;
  for (const pdist::ir::Value* v : runner.train_program().Parameters()) bytes += v->type().num_bytes();
  return bytes;
}

// Measured bubble per stage: the median over 7 recorded steps (after a warm-up step).
std::vector<double> MeasuredBubbles(ScheduleMode mode, const pdist::ir::Program& model) {
  const std::string dir = (std::filesystem::temp_directory_path() / "pdist_pipeline_bench").string();
  auto engine = Engine::Create(model.Clone(), Options(mode, dir));
  if (!engine.ok()) return {};
  const pdist::exec::Feeds feeds = pdist::calibration::FixedTokenBatch(model);
  std::vector<std::vector<double>> per_stage(kStages);
  for (int s = 0; s < 8; ++s) {
    if (!(*engine)->TrainStep(feeds).ok()) return {};
    if (s == 0) continue;
    pdist::exec::TimelineRows rows;
    for (const auto& runner : (*engine)->local_ranks()) rows.emplace_back(runner->rank(), runner->timeline()->Spans());
    const std::vector<double> bubbles = pdist::exec::BubbleFractions(rows);
    for (size_t k = 0; k < bubbles.size(); ++k) per_stage[k].push_back(bubbles[k]);
  }
  std::filesystem::remove_all(dir);
  std::vector<double> medians;
  for (std::vector<double>& v : per_stage) {
    std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(v.size() / 2), v.end());
    medians.push_back(v[v.size() / 2]);
  }
  return medians;
}

double TheoreticalBubble(ScheduleMode mode) {
  const pdist::passes::ScheduleShape shape{kStages, kMicroBatches, mode == ScheduleMode::kVPP ? 2 : 1};
  std::vector<std::vector<pdist::ir::PipelineJob>> jobs;
  for (int64_t s = 0; s < kStages; ++s) jobs.push_back(*pdist::passes::BuildSchedule(mode, shape, s));
  // A chunk is 1/v of a stage's layers: its jobs take 1/v of the time.
  const double v = static_cast<double>(shape.chunks);
  auto sim = pdist::passes::SimulateSchedule(jobs, shape, {.forward = 1 / v, .backward = 2 / v, .backward_input = 1 / v,
                                                           .backward_weight = 1 / v});
  return sim.ok() ? sim->bubble_fraction[0] : -1;
}

void BM_PipelineStep(benchmark::State& state) {
  const ScheduleMode mode = kModes[state.range(0)];
  const pdist::ir::Program model = Model();
  auto engine = Engine::Create(model.Clone(), Options(mode, ""));
  if (!engine.ok()) {
    state.SkipWithError(std::string(engine.status().message()).c_str());
    return;
  }
  const pdist::exec::Feeds feeds = pdist::calibration::FixedTokenBatch(model);
  std::vector<int64_t> peaks;
  if (auto warm = (*engine)->TrainStep(feeds); warm.ok()) peaks = warm->rank_peak_bytes;
  for (auto _ : state) {
    auto r = (*engine)->TrainStep(feeds);
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      return;
    }
    peaks = r->rank_peak_bytes;
  }
  const std::vector<double> bubbles = MeasuredBubbles(mode, model);
  for (size_t s = 0; s < peaks.size(); ++s) {
    const double mib = 1.0 / (1 << 20);
    state.counters[absl::StrCat("peak_", s)] = static_cast<double>(peaks[s]) * mib;
    state.counters[absl::StrCat("act_", s)] =
        static_cast<double>(peaks[s] - ParameterBytes(*(*engine)->local_ranks()[s])) * mib;
    if (s < bubbles.size()) state.counters[absl::StrCat("bubble_", s)] = bubbles[s];
  }
  state.counters["bubble_theory"] = TheoreticalBubble(mode);
  state.SetLabel(pdist::passes::ScheduleModeName(mode));
}
BENCHMARK(BM_PipelineStep)->ArgName("schedule")->DenseRange(0, 3)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
