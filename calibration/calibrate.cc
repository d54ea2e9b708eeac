// Calibration: this machine measured as CPU ranks through the engine, written as a cluster.
#include "calibration/calibrate.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <chrono>
#include <latch>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "executor/comm/inproc/inproc_communicator.h"
#include "executor/executor.h"
#include "passes/amp.h"
#include "passes/distributed_programs.h"
#include "engine/engine.h"
#include "ir/models/gpt.h"
#include "ir/parser.h"
#include "ir/status.h"
#include "calibration/fit.h"
#include "calibration/fixed_token_batch.h"
#include "planner/compute_cost.h"
#include "planner/segment_cost.h"

namespace pdist::calibration {
namespace {

using planner::CostOf;
using planner::PriceLocalProgram;

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Runs `measure` on `ranks` threads at once, each with `threads` kernel threads, and returns the
// median of what they measured (seconds).
absl::StatusOr<double> OnRanks(int64_t ranks, int threads, const std::function<absl::StatusOr<double>(int)>& measure) {
  std::vector<absl::StatusOr<double>> results(static_cast<size_t>(ranks), 0.0);
  std::vector<std::thread> pool;
  std::latch start(ranks);  // they measure together, so they contend as ranks do
  for (int r = 0; r < ranks; ++r) {
    pool.emplace_back([&, r] {
      exec::SetKernelThreadsOfThisThread(threads);
      start.arrive_and_wait();
      results[r] = measure(r);
    });
  }
  for (std::thread& t : pool) t.join();
  std::vector<double> seconds;
  for (const auto& r : results) {
    PDIST_RETURN_IF_ERROR(r.status());
    seconds.push_back(*r);
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

// Seconds of one op of `program` (copies of one op on parameters): the median of `runs` runs
// after a warm-up, divided by the number of copies.
absl::StatusOr<double> SecondsPerOp(const ir::Program& program, int runs) {
  PDIST_ASSIGN_OR_RETURN(exec::Executor executor, exec::Executor::Create(program, {.overlap_communication = false}));
  exec::Workspace workspace;
  PDIST_RETURN_IF_ERROR(exec::InitializeWorkspace(program, 1, workspace));
  PDIST_RETURN_IF_ERROR(executor.Run({}, workspace).status());
  std::vector<double> seconds;
  for (int i = 0; i < runs; ++i) {
    const Clock::time_point start = Clock::now();
    PDIST_RETURN_IF_ERROR(executor.Run({}, workspace).status());
    seconds.push_back(Since(start));
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2] / static_cast<double>(program.block().ops().size());
}

// `copies` of `op` applied to two parameters of `type`.
std::string CopiesOf(const std::string& op, const std::string& type, const std::string& result, int copies) {
  std::string text = absl::StrCat("program {\n  %a = param \"a\" : ", type, " {init = \"normal(0.02)\"}\n",
                                  "  %b = param \"b\" : ", type, " {init = \"normal(0.02)\"}\n");
  for (int i = 0; i < copies; ++i) absl::StrAppend(&text, "  %c", i, " = ", op, "(%a, %b) : ", result, "\n");
  return absl::StrCat(text, "}\n");
}

struct OpTiming {
  double seconds = 0;  // per op, on each of the ranks running at once
  ir::OpCost cost;
};

// `at_once` ranks running the op together, each with the kernel threads the engine gives a rank.
absl::StatusOr<OpTiming> TimeOp(int64_t at_once, int threads, const std::string& op, const std::string& type,
                                int copies, int runs) {
  PDIST_ASSIGN_OR_RETURN(ir::Program program, ir::ParseProgram(CopiesOf(op, type, type, copies)));
  OpTiming t;
  PDIST_ASSIGN_OR_RETURN(t.cost, CostOf(*program.block().ops().front()));
  PDIST_ASSIGN_OR_RETURN(t.seconds, OnRanks(at_once, threads, [&](int) { return SecondsPerOp(program, runs); }));
  return t;
}

// Seconds of an inproc all-reduce of `elements` f32 on every rank (median of `runs`).
absl::StatusOr<double> AllReduceSeconds(int64_t ranks, int64_t elements, int runs) {
  auto world = std::make_shared<exec::comm::InprocWorld>(static_cast<int>(ranks));
  return OnRanks(ranks, 1, [&](int rank) -> absl::StatusOr<double> {
    PDIST_ASSIGN_OR_RETURN(auto comm, exec::comm::CreateInprocCommunicator(world, rank));
    exec::Tensor x = exec::Tensor::Zeros({{elements}, ir::DataType::kFloat32});
    PDIST_RETURN_IF_ERROR(comm->AllReduce(x, x, exec::comm::ReduceOp::kSum));  // warm-up
    std::vector<double> seconds;
    for (int i = 0; i < runs; ++i) {
      const Clock::time_point start = Clock::now();
      PDIST_RETURN_IF_ERROR(comm->AllReduce(x, x, exec::comm::ReduceOp::kSum));
      seconds.push_back(Since(start));
    }
    std::sort(seconds.begin(), seconds.end());
    return seconds[seconds.size() / 2];
  });
}

// The reference step the op scales come from: a small GPT, one rank, AdamW; in a low-precision
// dtype, the same model through amp o2 (as pdist-export --dtype writes it).
constexpr int64_t kReferenceBatch = 8;
ir::Program ReferenceModel(int64_t batch = kReferenceBatch) {
  return *ir::models::BuildGpt({.vocab = 256, .hidden = 128, .layers = 2, .heads = 4, .seq_len = 64, .batch = batch});
}

absl::StatusOr<ir::Program> LowPrecisionReferenceModel(ir::DataType dtype) {
  ir::Program model = ReferenceModel();
  PDIST_RETURN_IF_ERROR(passes::ApplyAmp(model, dtype, passes::AmpLevel::kO2).status());
  return model;
}

constexpr int kWarmUpSteps = 3;  // the first steps run up to 3× slower while the allocator grows
constexpr int kTimedSteps = 5;

// Wall seconds per step of `engine` (mean of kTimedSteps after the warm-up); `after_step` sees
// each timed step's result.
absl::StatusOr<double> SecondsPerStep(engine::Engine& engine, const exec::Feeds& feeds,
                                      const std::function<void(const engine::StepResult&)>& after_step = nullptr) {
  for (int s = 0; s < kWarmUpSteps; ++s) PDIST_RETURN_IF_ERROR(engine.TrainStep(feeds).status());
  const Clock::time_point start = Clock::now();
  for (int s = 0; s < kTimedSteps; ++s) {
    PDIST_ASSIGN_OR_RETURN(engine::StepResult r, engine.TrainStep(feeds));
    if (after_step) after_step(r);
  }
  return Since(start) / kTimedSteps;
}

// Training steps of the reference model on each of `at_once` single-rank engines running
// together: wall seconds per step (median over ranks) and, when profiled, kernel seconds per op
// type (averaged over ranks and steps).
struct ReferenceSteps {
  double step_seconds = 0;
  std::map<std::string, double> kernel_seconds;
};

absl::StatusOr<ReferenceSteps> RunReferenceSteps(int64_t at_once, int threads, bool profile,
                                                 const ir::Program& model = ReferenceModel()) {
  const exec::Feeds feeds = FixedTokenBatch(model);
  std::vector<std::map<std::string, double>> per_rank(static_cast<size_t>(at_once));
  ReferenceSteps out;
  PDIST_ASSIGN_OR_RETURN(out.step_seconds, OnRanks(at_once, threads, [&](int rank) -> absl::StatusOr<double> {
                           engine::EngineOptions options;
                           options.profile = profile;
                           PDIST_ASSIGN_OR_RETURN(auto engine, engine::Engine::Create(model.Clone(), options));
                           return SecondsPerStep(*engine, feeds, [&](const engine::StepResult& r) {
                             for (const auto& [type, seconds] : r.op_seconds) per_rank[rank][type] += seconds;
                           });
                         }));
  for (const auto& rank : per_rank) {
    for (const auto& [type, seconds] : rank) {
      out.kernel_seconds[type] += seconds / static_cast<double>(kTimedSteps * at_once);
    }
  }
  return out;
}

// Wall seconds per step of the reference model trained data parallel on `ranks` in-process
// ranks of one engine, each rank with the reference batch: the ranks as training runs them.
absl::StatusOr<double> DataParallelStepSeconds(int64_t ranks) {
  const ir::Program model = ReferenceModel(kReferenceBatch * ranks);
  engine::EngineOptions options;
  options.strategy_json = absl::StrCat("{\"dp_degree\": ", ranks, "}");
  PDIST_ASSIGN_OR_RETURN(auto engine, engine::Engine::Create(model.Clone(), options));
  return SecondsPerStep(*engine, FixedTokenBatch(model));
}

// Measured over predicted kernel time per op type of the reference step (OpScalesFrom).
absl::StatusOr<std::map<std::string, double>> OpScales(const strategy::Cluster& cluster, int64_t at_once,
                                                       int threads) {
  PDIST_ASSIGN_OR_RETURN(ReferenceSteps steps, RunReferenceSteps(at_once, threads, /*profile=*/true));
  const std::map<std::string, double>& measured = steps.kernel_seconds;
  PDIST_ASSIGN_OR_RETURN(passes::DistributedPrograms programs,
                         passes::BuildDistributedPrograms(ReferenceModel(), strategy::Strategy{}, {}));
  std::map<std::string, double> predicted;
  PDIST_RETURN_IF_ERROR(PriceLocalProgram(programs.train, cluster, &predicted).status());
  return OpScalesFrom(measured, predicted);
}

// The low-precision dtype's own factors ("add@bf16"), from the reference step through amp o2
// against its roofline: `cluster` carries the f32 factors already, which these refine where the
// dtype's kernels (f32 math on converted copies) scale apart from them.
absl::StatusOr<std::map<std::string, double>> LowPrecisionOpScales(const strategy::Cluster& cluster, ir::DataType dtype,
                                                                   int64_t at_once, int threads) {
  PDIST_ASSIGN_OR_RETURN(const ir::Program model, LowPrecisionReferenceModel(dtype));
  PDIST_ASSIGN_OR_RETURN(ReferenceSteps steps, RunReferenceSteps(at_once, threads, /*profile=*/true, model));
  PDIST_ASSIGN_OR_RETURN(passes::DistributedPrograms programs,
                         passes::BuildDistributedPrograms(model, strategy::Strategy{}, {}));
  std::map<std::string, double> predicted;
  PDIST_RETURN_IF_ERROR(PriceLocalProgram(programs.train, cluster, &predicted).status());
  return LowPrecisionOpScalesFrom(steps.kernel_seconds, predicted, ir::DataTypeName(dtype),
                                  cluster.device.efficiency.op_scale);
}

}  // namespace

absl::StatusOr<strategy::Cluster> CalibrateCpu(int64_t ranks, const std::function<void(const std::string&)>& progress) {
  // The ranks run as threads of this process: the engine's in-process ranks, and its limit.
  if (ranks < 1 || ranks > engine::kMaxInProcessRanks) {
    return absl::InvalidArgumentError(
        absl::StrCat("calibration runs 1..", engine::kMaxInProcessRanks, " ranks as threads, got ", ranks));
  }
  auto say = [&](const std::string& what) {
    if (progress) progress(what);
  };
  strategy::Cluster c;
  c.name = absl::StrCat("cpu-local (", ranks, " ranks as threads)");
  c.devices_per_node = ranks;
  // The ranks share the machine's cores; each computes with the engine's share of them, and the
  // estimate counts how many can run at once (strategy::Cluster::shared_cores).
  c.shared_cores = std::max(1, exec::KernelThreadsOfThisThread());
  const int threads = static_cast<int>(std::max<int64_t>(1, c.shared_cores / ranks));
  const int64_t at_once = std::min<int64_t>(ranks, std::max<int64_t>(1, c.shared_cores / threads));
  c.device.name = "cpu-rank";
  strategy::Efficiency& e = c.device.efficiency;
  e.gemm = 1;
  e.memory = 1;

  say("per-op overhead");
  PDIST_ASSIGN_OR_RETURN(OpTiming tiny, TimeOp(at_once, threads, "add", "f32[4]", 200, 9));
  e.op_overhead = tiny.seconds;

  say("memory bandwidth");
  // Activation-sized tensors (1 MiB), as the ops of the models planned here move.
  PDIST_ASSIGN_OR_RETURN(OpTiming stream, TimeOp(at_once, threads, "add", "f32[262144]", 8, 9));
  c.device.memory_bandwidth = stream.cost.bytes / std::max(stream.seconds - e.op_overhead, 1e-9);

  // rate(f) = P·f/(f + h) from a large and a small matmul (overhead taken out): two equations.
  double half = 0;
  // bf16 and f16 run as f32 math on upcast operands (executor/cpu/float_math.h): their rate is
  // measured too, conversions included, so the planner prices a mixed-precision plan as it runs.
  for (const char* dtype : {"f32", "f64", "bf16", "f16"}) {
    say(absl::StrCat("GEMM ", dtype));
    PDIST_ASSIGN_OR_RETURN(OpTiming large, TimeOp(at_once, threads, "matmul", absl::StrCat(dtype, "[512,512]"), 4, 5));
    PDIST_ASSIGN_OR_RETURN(OpTiming small, TimeOp(at_once, threads, "matmul", absl::StrCat(dtype, "[48,48]"), 50, 9));
    const GemmCurve curve = FitGemmCurve({large.cost.flops, large.seconds}, {small.cost.flops, small.seconds}, e.op_overhead);
    c.device.peak_flops[dtype] = curve.peak_flops;
    if (std::string(dtype) == "f32") half = std::max(curve.half_flops, 1.0);
  }
  e.gemm_half_flops = half;

  say("inproc all-reduce");
  const double n = static_cast<double>(ranks);
  if (ranks > 1) {
    const int64_t big = int64_t{4} << 20;  // 16 MiB of f32
    PDIST_ASSIGN_OR_RETURN(double big_s, AllReduceSeconds(ranks, big, 5));
    PDIST_ASSIGN_OR_RETURN(double small_s, AllReduceSeconds(ranks, 1, 21));
    const Link link = FitAllReduceLink(ranks, static_cast<double>(big * 4), big_s, small_s);
    c.intra_node.bandwidth = link.bandwidth;
    c.intra_node.latency = link.latency;
  } else {
    c.intra_node = {c.device.memory_bandwidth, 1e-6};
  }
  c.inter_node = c.intra_node;

  say("op scales (a reference training step)");
  PDIST_ASSIGN_OR_RETURN(e.op_scale, OpScales(c, at_once, threads));
  for (ir::DataType dtype : {ir::DataType::kBFloat16, ir::DataType::kFloat16}) {
    say(absl::StrCat("op scales in ", ir::DataTypeName(dtype), " (the reference step through amp o2)"));
    PDIST_ASSIGN_OR_RETURN(auto low, LowPrecisionOpScales(c, dtype, at_once, threads));
    e.op_scale.insert(low.begin(), low.end());
  }

  if (ranks > at_once) {
    // More ranks than run at once: the reference step data parallel on all of them in one
    // engine, against the time the cores would take if slicing them cost nothing (the step on
    // as many independent engines as run at once, times ranks / at_once). The gradient
    // all-reduce of this small model is a few per cent of its step.
    // Scheduling makes single runs vary by ±25%: the median of 5 paired runs.
    say("time slicing");
    std::vector<double> efficiency;
    for (int run = 0; run < 5; ++run) {
      PDIST_ASSIGN_OR_RETURN(ReferenceSteps together, RunReferenceSteps(at_once, threads, /*profile=*/false));
      PDIST_ASSIGN_OR_RETURN(double sliced, DataParallelStepSeconds(ranks));
      efficiency.push_back(together.step_seconds * static_cast<double>(ranks) / static_cast<double>(at_once) / sliced);
    }
    std::sort(efficiency.begin(), efficiency.end());
    c.shared_cores_efficiency = std::clamp(efficiency[efficiency.size() / 2], 0.05, 1.0);
  }
  c.device.memory = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE)) / n;
  return c;
}

}  // namespace pdist::calibration
