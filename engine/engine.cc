// Engine: program preparation, train/eval steps, fit loop, checkpoints.
#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "engine/checkpoint.h"
#include "engine/sharded_checkpoint.h"
#include "passes/batch_inputs.h"
#include "passes/distributed_programs.h"
#include "passes/inference.h"
#include "passes/loss_scaling.h"
#include "engine/comm_backend.h"
#include "engine/device_choice.h"
#include "engine/feed_checks.h"
#include "engine/launched_rank.h"
#include "engine/message_order.h"
#include "engine/timeline_files.h"
#include "ir/dist/shard_tensor.h"
#include "ir/status.h"
#include "ir/verifier.h"

namespace pdist::engine {

double LearningRateSchedule::At(int64_t step) const {
  if (warmup_steps > 0 && step < warmup_steps) return base * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  if (decay_steps <= 0) return base;
  const double t = std::min(1.0, static_cast<double>(step - warmup_steps) / static_cast<double>(decay_steps));
  const double cosine = 0.5 * (1.0 + std::cos(3.141592653589793 * t));
  return base * (min_ratio + (1.0 - min_ratio) * cosine);
}

namespace {

// The kernel fusions, where a launch and a pass over memory cost something (a GPU), unless the
// options say.
passes::KernelFusions FusionsFor(const EngineOptions& o, const exec::Device& device) {
  const bool gpu = device.type == exec::DeviceType::kCUDA;
  return {.optimizer = o.fuse_optimizer.value_or(gpu), .gemm_epilogue = o.fuse_gemm_epilogue.value_or(gpu)};
}

RunnerOptions RunnerOptionsOf(const EngineOptions& o, const exec::Device& device) {
  return {.device = device,
          .profile = o.profile, .overlap_communication = o.overlap_communication,
          .gradient_bucket_bytes = o.gradient_bucket_bytes,
          .fusions = FusionsFor(o, device), .timeline = !o.timeline_dir.empty()};
}

// The options outside the optimizer's hyper-parameters (the optimizer pass checks those, for
// every front end and pipeline string): each refused naming its value, so a typo such as a
// negative learning rate (gradient ascent) or a zero timeout is an error, not a strange run.
absl::Status CheckEngineOptions(const EngineOptions& o) {
  const LearningRateSchedule& lr = o.lr;
  if (!std::isfinite(lr.base) || lr.base < 0) {
    return absl::InvalidArgumentError(absl::StrCat("learning rate ", lr.base, " must be >= 0 and finite"));
  }
  if (lr.warmup_steps < 0) {
    return absl::InvalidArgumentError(absl::StrCat("warm-up steps ", lr.warmup_steps, " must be >= 0"));
  }
  if (lr.decay_steps < 0) {
    return absl::InvalidArgumentError(absl::StrCat("decay steps ", lr.decay_steps, " must be >= 0"));
  }
  if (!(lr.min_ratio >= 0 && lr.min_ratio <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("the decay's min_ratio ", lr.min_ratio, " must be in [0, 1]"));
  }
  if (!(o.collective_timeout_s > 0)) {  // inf is no deadline; NaN and <= 0 none at all
    return absl::InvalidArgumentError(
        absl::StrCat("collective timeout ", o.collective_timeout_s, " s must be > 0"));
  }
  if (!(o.checkpoint_timeout_s > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint timeout ", o.checkpoint_timeout_s, " s must be > 0"));
  }
  if (o.gradient_bucket_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat("gradient bucket of ", o.gradient_bucket_bytes, " bytes must be >= 0"));
  }
  return absl::OkStatus();
}

enum class StepKind { kTraining, kEvaluation, kPrediction };

// A pipeline over a backend whose sends wait for their receives (NCCL) hangs when the two ends
// of a channel issue its messages in different orders. The passes' rules keep them in one order
// (docs/pipeline.md, "Message order"); this runs the step's messages without data on the ranks
// of `runners` and every rank they exchange with, so that a defect in those rules is an error
// before the first step, not a job that hangs until its collective timeout. `global` is the
// step's global program; the runners hold their ranks' local ones.
absl::Status CheckMessagesBeforeRunning(StepKind kind, const ir::Program& global,
                                        const std::vector<std::unique_ptr<RankRunner>>& runners,
                                        passes::ReshardPlanCache& plans) {
  const RunnerOptions& options = runners.front()->options();
  std::vector<int64_t> ranks;
  for (const auto& runner : runners) ranks.push_back(runner->rank());
  std::map<int64_t, ir::Program> built;  // the peers' programs, made here for the check alone
  absl::Status status = CheckMessageOrderAround(ranks, [&](int64_t rank) -> absl::StatusOr<RankStep> {
    const ir::Program* program = nullptr;
    for (const auto& runner : runners) {
      if (runner->rank() != rank) continue;
      program = kind == StepKind::kTraining     ? &runner->train_program()
                : kind == StepKind::kEvaluation ? &runner->eval_program()
                                                : &runner->predict_program();
    }
    if (program == nullptr) {
      const std::string pipeline = kind == StepKind::kTraining
                                       ? passes::RankPipeline(rank, options.gradient_bucket_bytes, options.fusions)
                                       : passes::RankPipeline(rank, {});
      PDIST_ASSIGN_OR_RETURN(ir::Program local, passes::LocalProgram(global, pipeline, plans));
      program = &built.emplace(rank, std::move(local)).first->second;
    }
    std::vector<ir::PipelineJob> jobs;
    if (kind == StepKind::kPrediction) {
      jobs = options.pipeline.PredictJobs();
    } else {
      PDIST_ASSIGN_OR_RETURN(jobs, options.pipeline.JobsOf(rank, /*forward_only=*/kind == StepKind::kEvaluation));
    }
    return RankStep{.rank = rank, .program = program, .jobs = std::move(jobs)};
  });
  if (status.ok() || !absl::IsFailedPrecondition(status)) return status;
  const char* what = kind == StepKind::kTraining ? "training" : kind == StepKind::kEvaluation ? "evaluation" : "prediction";
  return absl::InternalError(absl::StrCat(
      "the ", what, " step's point-to-point messages would hang over NCCL: ", status.message(),
      " — a defect in pdist's pipeline passes (please report it with the strategy); the same strategy runs on "
      "CPU ranks over --backend gloo, whose sends do not wait for their receives"));
}

}  // namespace

Engine::Engine(ir::Program forward, EngineOptions options, const CommBackend* backend, exec::Device device)
    : forward_(std::move(forward)), options_(std::move(options)), backend_(backend), device_(device) {}

absl::Status EngineOptions::SetFusions(const std::string& spec) {
  if (spec == "auto") {
    fuse_optimizer.reset();
    fuse_gemm_epilogue.reset();
    return absl::OkStatus();
  }
  bool optimizer = false, gemm_epilogue = false;
  if (spec != "none") {
    const std::vector<std::string> names = absl::StrSplit(spec, ',');
    for (const std::string& name : names) {
      optimizer |= name == "all" || name == "optimizer";
      gemm_epilogue |= name == "all" || name == "gemm-epilogue";
      if (name != "all" && name != "optimizer" && name != "gemm-epilogue") {
        return absl::InvalidArgumentError(absl::StrCat("unknown fusion '", name,
                                                       "' (expected auto, all, none, or a comma list of optimizer and "
                                                       "gemm-epilogue)"));
      }
    }
  }
  fuse_optimizer = optimizer;
  fuse_gemm_epilogue = gemm_epilogue;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(ir::Program forward, EngineOptions options) {
  PDIST_RETURN_IF_ERROR(CheckEngineOptions(options));
  if (forward.loss() == nullptr) return absl::InvalidArgumentError("the model has no loss");
  if (!forward.gradients().empty() || !forward.updates().empty()) {
    return absl::InvalidArgumentError("the model already has backward or optimizer ops; give the forward program");
  }
  PDIST_ASSIGN_OR_RETURN(const CommBackend* backend, FindCommBackend(options.backend));
  PDIST_ASSIGN_OR_RETURN(const exec::Device device, ChooseDevice(options.device));
  if (backend->device_memory && device.is_cpu()) {
    // Worded for every caller: pdist-train's flags, the C API's config, Python's keywords.
    return absl::InvalidArgumentError(absl::StrCat(
        "backend '", backend->name, "' moves GPU memory: use device cuda (pdist-train --device cuda, "
        "pdist.Engine(device=\"cuda\")), or backend gloo for ranks on the CPU (device '", options.device, "')"));
  }
  PDIST_RETURN_IF_ERROR(WithContext(ir::VerifyProgram(forward), "model"));
  // A batch of no samples has no mean loss: its first step's nan blamed the initialisers. (Dim 0
  // is the batch, as micro-batching takes it; an empty dim elsewhere — a cache of no past
  // positions — is the model's own.)
  for (const ir::Value* arg : forward.block().arguments()) {
    const ir::Shape& shape = arg->type().shape;
    if (arg->role() == ir::ValueRole::kDataInput && !shape.empty() && shape[0] == 0) {
      return absl::InvalidArgumentError(absl::StrCat("model: data input '", arg->name(), "' is ",
                                                     arg->type().ToString(),
                                                     ", a batch of no samples: a batch needs at least one"));
    }
  }
  if (!options.timeline_dir.empty()) PDIST_RETURN_IF_ERROR(MakeTimelineDirectory(options.timeline_dir));
  auto engine = std::unique_ptr<Engine>(new Engine(std::move(forward), std::move(options), backend, device));
  engine->feed_checks_ = FeedChecks::Of(engine->forward_);
  PDIST_RETURN_IF_ERROR(engine->Prepare());
  return engine;
}

absl::Status Engine::Prepare() {
  // The batch as data parallelism and micro-batching see it (passes/batch_inputs.h).
  const absl::StatusOr<passes::BatchInputs> batch_inputs = passes::FindBatchInputs(forward_);
  if (batch_inputs.ok()) tokens_per_step_ = batch_inputs->inputs.front()->type().num_elements();
  if (!options_.strategy_json.empty()) {
    PDIST_ASSIGN_OR_RETURN(strategy_, strategy::ParseStrategy(options_.strategy_json));
  }
  const strategy::Strategy& strategy = strategy_;
  PDIST_RETURN_IF_ERROR(WithContext(passes::CheckExecutable(strategy), "strategy"));
  // A program whose values carry DistAttrs of their own is distributed even without a strategy.
  const bool annotated = !strategy.annotations.empty() || ir::HasPlacements(forward_);
  // Micro-batches first, then each split over dp: a micro-batch dp cannot split was named as a
  // data input of batch 1 "not divisible by dp_degree", with no word of the micro-batches.
  if (strategy.MicroBatches() > 1 && strategy.dp_degree > 1 && batch_inputs.ok()) {
    const int64_t batch = batch_inputs->batch, micro = strategy.MicroBatches();
    if (batch % micro == 0 && (batch / micro) % strategy.dp_degree != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the batch of ", batch, " in ", micro, " micro-batches (",
          strategy.gradient_merge.enable ? "gradient_merge.k_steps" : "pipeline.accumulate_steps", ") leaves ",
          batch / micro, " per micro-batch, which dp_degree ", strategy.dp_degree,
          " does not divide: fewer micro-batches, or a batch of a multiple of ", micro * strategy.dp_degree));
    }
  }
  // Micro-batches cut a program before it is placed; placements the user gave cannot follow
  // (it said "micro-batches: split the program before it is annotated").
  if (annotated && strategy.MicroBatched()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the program's own placements (shard_tensor, or the strategy's annotations) run without micro-batches, but "
        "the strategy has ", strategy.pp_degree > 1 ? absl::StrCat("pp_degree ", strategy.pp_degree) : "",
        strategy.pp_degree > 1 ? " and " : "", strategy.MicroBatches(), " micro-batches: leave the placements to "
        "the degrees (dp, mp, sp), or train in one micro-batch on one stage"));
  }
  // One rank runs the plain pipeline unless the strategy rewrites its program.
  const bool rewritten = strategy.MicroBatches() > 1 || strategy.recompute.enable || strategy.amp.enable;
  const int64_t world_size = passes::WorldSizeOf(strategy, forward_);
  // Each in-process rank is a thread with its own copy of its programs and state: past this, a
  // job exhausts the process (threads, memory) before its first step, and crashes rather than
  // saying so.
  if (!backend_->process_per_rank && world_size > kMaxInProcessRanks) {
    return absl::InvalidArgumentError(absl::StrCat("a job of ", world_size, " ranks as threads of one process (backend '",
                                                   backend_->name, "'): at most ", kMaxInProcessRanks,
                                                   "; run more as processes under pdist-run"));
  }
  // A launcher's processes that each ran this job alone would train N copies and race on every
  // file they write (a user probe: pdist-run --nprocs 2 without --strategy exited 0).
  if (const int64_t launched = LaunchedProcesses(); launched > 1) {
    if (!backend_->process_per_rank) {
      return absl::InvalidArgumentError(absl::StrCat(
          "backend '", backend_->name, "' runs every rank as a thread of one process, but a launcher started ", launched,
          " processes (WORLD_SIZE ", launched, "): each would train alone; use backend 'gloo' (pdist-run's) or "
          "start one process"));
    }
    if (world_size == 1) {
      return absl::InvalidArgumentError(absl::StrCat("a launcher started ", launched, " processes (WORLD_SIZE ",
                                                     launched, ") but the strategy has 1 rank: give a strategy of ",
                                                     launched, " ranks, e.g. {\"dp_degree\": ", launched, "}"));
    }
  }
  if (world_size == 1 && !annotated && !rewritten) return PrepareSingleRank();
  return PrepareDistributed(strategy);
}

absl::Status Engine::PrepareSingleRank() {
  train_ = forward_.Clone();
  passes::PassContext context;
  PDIST_RETURN_IF_ERROR(
      passes::RunPipeline(passes::SingleRankPipeline(options_.optimizer, FusionsFor(options_, device_)), train_,
                          context, "training program"));
  passes::ReshardPlanCache plans;
  ir::Program eval = forward_.Clone();
  passes::SetEvalMode(eval);
  PDIST_ASSIGN_OR_RETURN(auto runner, RankRunner::Create(train_, eval, /*rank=*/-1, plans, RunnerOptionsOf(options_, device_)));
  PDIST_RETURN_IF_ERROR(runner->Initialize(options_.seed));
  runners_.push_back(std::move(runner));
  return absl::OkStatus();
}

absl::Status Engine::PrepareDistributed(const strategy::Strategy& strategy) {
  PDIST_ASSIGN_OR_RETURN(passes::DistributedPrograms programs,
                         passes::BuildDistributedPrograms(forward_, strategy, options_.optimizer));
  world_size_ = programs.world_size;
  if (world_size_ > 1 && !device_.is_cpu() && !backend_->device_memory) {
    return absl::InvalidArgumentError(absl::StrCat("a job of ", world_size_, " ranks on ", device_.ToString(),
                                                   " needs a communicator that moves GPU memory: backend '",
                                                   backend_->name, "' moves host memory; use --backend nccl"));
  }
  if (world_size_ > 1 && !backend_->buffered_sends && !options_.overlap_communication && programs.pipeline.enabled()) {
    // A send that waits for its receive, issued by the thread that computes, deadlocks a pipeline
    // (and any exchange where both ends send first); the communication streams, one per
    // direction, are what keeps each send from holding anything but its own direction.
    return absl::InvalidArgumentError(absl::StrCat("backend '", backend_->name,
                                                   "' holds each send until its receive runs: a pipeline over it "
                                                   "needs the communication streams (overlap_communication)"));
  }
  train_ = std::move(programs.train);
  exec::comm::CommConfig config;
  // Past ~290 years a deadline overflows the nanoseconds some backends count in (Gloo's 1e10 s
  // timed out at once); that far off is no deadline, and is kept as 1e9 s (31 years).
  config.timeout = absl::Seconds(std::min(options_.collective_timeout_s, kLongestCollectiveTimeoutS));

  PDIST_ASSIGN_OR_RETURN(worlds_, backend_->create_world(world_size_, config, device_));
  std::vector<int64_t> ranks;
  for (const auto& world : worlds_) ranks.push_back(world->rank());
  // Ranks that are threads of this process share its cores.
  kernel_threads_per_rank_ = std::max(1, exec::KernelThreadsOfThisThread() / static_cast<int>(ranks.size()));

  passes::ReshardPlanCache plans;
  RunnerOptions runner_options = RunnerOptionsOf(options_, device_);
  runner_options.pipeline = programs.pipeline;
  for (int64_t r : ranks) {
    PDIST_ASSIGN_OR_RETURN(auto runner, RankRunner::Create(train_, programs.eval, r, plans, runner_options));
    runners_.push_back(std::move(runner));
  }
  if (!backend_->buffered_sends && programs.pipeline.enabled()) {
    PDIST_RETURN_IF_ERROR(CheckMessagesBeforeRunning(StepKind::kTraining, train_, runners_, plans));
    PDIST_RETURN_IF_ERROR(CheckMessagesBeforeRunning(StepKind::kEvaluation, programs.eval, runners_, plans));
  }
  return OnEveryRank([&](size_t k, RankRunner& runner) -> absl::Status {
    PDIST_RETURN_IF_ERROR(runner.Connect(worlds_[k], programs.meshes));
    return runner.Initialize(options_.seed);
  });
}

// A rank that finishes first must not close its connections while a peer is still inside the
// last collective: the peer's data would go down with the socket ("connection closed by peer"
// on a loaded machine). So every rank that is a process of its own meets the others at a closing barrier, which it can
// only pass once every peer has finished all earlier collectives. Errors are ignored: after a
// failure the barrier fails fast (an aborted or closed communicator, or a fingerprint that
// names the collective a peer is stuck in).
Engine::~Engine() {
  if (backend_->process_per_rank && world_size_ > 1 && !worlds_.empty()) worlds_.front()->Barrier().IgnoreError();
}

// A deadline's error says which option sets it (the communicators cannot: they serve every
// caller). After an earlier failure aborted the communicators, work that needs them fails for
// good — in-process ranks can still save, ranks that are processes cannot (a save agrees over
// them): the error says why and what to do.
absl::Status Engine::Explained(absl::Status status) const {
  if (status.ok()) return status;
  // Only the aborted communicators' own refusal (executor/comm/communicator.cc), not a later
  // load's error of its own.
  if (!aborted_.ok() && absl::StrContains(status.message(), "communicator unusable after an earlier error")) {
    return absl::Status(status.code(),
                        absl::StrCat(status.message(), " (this engine's communicators were aborted after an earlier "
                                                       "failure, so that no rank waited for the failed one: ",
                                     aborted_.message(), "; create a new engine and load the last checkpoint)"));
  }
  if (!absl::IsDeadlineExceeded(status)) return status;
  return absl::Status(status.code(), absl::StrCat(status.message(), " (the deadline is the collective timeout, ",
                                                  options_.collective_timeout_s,
                                                  " s: pdist-train --collective-timeout-s, collective_timeout_s)"));
}

absl::Status Engine::OnEveryRank(const std::function<absl::Status(size_t, RankRunner&)>& fn, RankWork work) const {
  const bool abort = work == RankWork::kCommunicates && !worlds_.empty();
  if (runners_.size() == 1) {
    absl::Status status = Explained(fn(0, *runners_[0]));
    if (!status.ok() && abort) AbortWorld(status);  // peers in other processes stop waiting
    return status;
  }
  std::vector<absl::Status> statuses(runners_.size());
  std::vector<std::thread> threads;
  threads.reserve(runners_.size());
  for (size_t i = 0; i < runners_.size(); ++i) {
    threads.emplace_back([&, i] {
      exec::SetKernelThreadsOfThisThread(kernel_threads_per_rank_);
      statuses[i] = fn(i, *runners_[i]);
      if (!statuses[i].ok() && abort) {
        for (const auto& world : worlds_) world->Abort();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  // The root cause: a failure that is not another rank's abort.
  absl::Status first;
  for (size_t i = 0; i < statuses.size() && first.ok(); ++i) {
    if (!statuses[i].ok() && !absl::IsAborted(statuses[i])) first = WithContext(statuses[i], absl::StrCat("rank ", runners_[i]->rank()));
  }
  for (size_t i = 0; i < statuses.size() && first.ok(); ++i) {
    if (!statuses[i].ok()) first = WithContext(statuses[i], absl::StrCat("rank ", runners_[i]->rank()));
  }
  first = Explained(first);
  if (!first.ok() && abort) AbortWorld(first);
  return first;
}

absl::Status Engine::AgreeOnceAllAreDone(const absl::Status& mine, const std::string& what) const {
  if (backend_->process_per_rank && world_size_ > 1) {
    const double timeout_s = std::min(options_.checkpoint_timeout_s, kLongestCollectiveTimeoutS);  // as given
    const absl::Status waited =
        WithContext(worlds_.front()->Barrier(absl::Seconds(timeout_s)),
                    absl::StrCat(what, ": waiting for every rank (at most ", timeout_s,
                                 " s: pdist-train --checkpoint-timeout-s, checkpoint_timeout_s)"));
    if (!waited.ok()) {
      AbortWorld(waited);  // later calls name this wait, not the collective timeout
      return mine.ok() ? waited : mine;
    }
  }
  return AgreeOnFailure(mine, what);
}

absl::Status Engine::AgreeOnFailure(const absl::Status& mine, const std::string& what) const {
  // (rank + 1) · 256 + the error's code: the ranks learn which rank failed (the highest) and
  // raise the same kind of error it did (Python's exception type, on every rank alike).
  const int64_t code = static_cast<int64_t>(mine.code());
  absl::StatusOr<int64_t> failed = MaxOverRanks(mine.ok() ? 0 : (first_local_rank() + 1) * 256 + code);
  if (!mine.ok()) return mine;
  if (!failed.ok()) return WithContext(failed.status(), what);
  if (*failed != 0) {
    return absl::Status(static_cast<absl::StatusCode>(*failed % 256),
                        absl::StrCat(what, " failed on rank ", *failed / 256 - 1, " (its error is in its output)"));
  }
  return absl::OkStatus();
}

void Engine::AbortWorld(const absl::Status& cause) const {
  for (const auto& world : worlds_) world->Abort();
  if (aborted_.ok()) aborted_ = cause;
}

int64_t Engine::first_local_rank() const { return std::max<int64_t>(0, runners_.front()->rank()); }

absl::StatusOr<exec::Workspace> Engine::WholeState() const {
  std::vector<exec::Workspace> states(runners_.size());
  PDIST_RETURN_IF_ERROR(OnEveryRank([&](size_t k, RankRunner& runner) -> absl::Status {
    PDIST_ASSIGN_OR_RETURN(states[k], runner.WholeState());
    return absl::OkStatus();
  }));
  // Each rank holds the tensors of its mesh; on several meshes (stages) they add up.
  exec::Workspace whole;
  for (exec::Workspace& state : states) whole.merge(state);
  if (backend_->process_per_rank && world_size_ > 1) PDIST_RETURN_IF_ERROR(SendOtherMeshesToRankZero(whole));
  return whole;
}

// With a process per rank (gloo), a process holds only its stage's tensors: the first rank of each other mesh sends
// them to rank 0, in the global program's order (tag 0: training's moves use tags from 1).
absl::Status Engine::SendOtherMeshesToRankZero(exec::Workspace& whole) const {
  const int64_t me = first_local_rank();
  exec::comm::Communicator& world = *worlds_.front();
  for (const ir::Value* arg : train_.block().arguments()) {
    if (!arg->is_persistent() || arg->dist_attr()->mesh.Contains(0)) continue;
    const int64_t owner = arg->dist_attr()->mesh.process_ids().front();
    if (me == owner) {
      PDIST_RETURN_IF_ERROR(WithContext(world.Send(whole.at(arg->name()), 0), absl::StrCat("sending '", arg->name(), "'")));
    } else if (me == 0) {
      exec::Tensor t = exec::Tensor::Empty(arg->type());
      PDIST_RETURN_IF_ERROR(WithContext(world.Recv(t, static_cast<int>(owner)), absl::StrCat("receiving '", arg->name(), "'")));
      whole[arg->name()] = std::move(t);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<StepResult> Engine::TrainStep(const exec::Feeds& feeds) {
  PDIST_RETURN_IF_ERROR(feed_checks_.Check(feeds, FeedUse::kTraining));
  exec::Feeds all = feeds;
  const ir::Value* lr_value = train_.FindArgument(passes::kLearningRateFeed);
  StepResult result;
  result.step = step_;
  result.lr = options_.lr.At(step_);
  all[passes::kLearningRateFeed] = exec::Tensor::Scalar(lr_value->type().dtype, result.lr);
  // Ranks in separate processes have no common clock: with a timeline they meet at a barrier
  // first, so that every process's origin (its step start) is the same instant to within the
  // barrier's latency and pdist-run's picture lines their rows up.
  if (!options_.timeline_dir.empty() && backend_->process_per_rank && !worlds_.empty()) {
    PDIST_RETURN_IF_ERROR(WithContext(Explained(worlds_.front()->Barrier()), "aligning the ranks' timeline clocks"));
  }
  const auto start = std::chrono::steady_clock::now();
  for (const auto& runner : runners_) {
    if (runner->timeline() != nullptr) runner->timeline()->Reset(start);  // one origin: rows line up
  }
  std::vector<exec::RunResult> runs(runners_.size());
  PDIST_RETURN_IF_ERROR(OnEveryRank([&](size_t k, RankRunner& runner) -> absl::Status {
    PDIST_ASSIGN_OR_RETURN(runs[k], runner.Train(all));
    return absl::OkStatus();
  }));
  const exec::RunResult& run = runs.front();
  if (!std::isfinite(run.loss)) {
    // The step ran its update (or loss scaling skipped it, which counts as a step too): the
    // count goes on with the parameters, so that a save records the two together. The first
    // step's loss is computed from the initial values: the model or the batch made it (a nan or
    // inf initialiser, an attribute such as a negative norm epsilon, an infinite input), not
    // the rate.
    const int64_t failed = step_++;
    return absl::InvalidArgumentError(absl::StrCat(
        "loss is ", run.loss, " at step ", failed,
        failed == 0 ? " (computed from the initial parameters: check the model's initialisers and attributes, and "
                      "the batch for infinities"
                    : " (diverged: lower the learning rate",
        "; the step's update, unless loss scaling skipped it, is in the parameters: go on from a checkpoint)"));
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.loss = run.loss;
  for (const exec::RunResult& r : runs) {
    result.peak_bytes = std::max(result.peak_bytes, r.peak_bytes);
    result.rank_peak_bytes.push_back(r.peak_bytes);
    result.rank_peak_gradient_bytes.push_back(r.peak_gradient_bytes);
    result.rank_peak_activation_bytes.push_back(r.peak_activation_bytes);
  }
  result.op_seconds = run.op_seconds;
  const RankRunner& first = *runners_.front();
  PDIST_ASSIGN_OR_RETURN(std::optional<exec::Tensor> scale, first.StateOnHost(passes::kLossScalingState));
  if (scale) {
    result.loss_scale = scale->At(0);
    PDIST_ASSIGN_OR_RETURN(std::optional<exec::Tensor> skipped, first.StateOnHost(passes::kSkippedStepsState));
    if (skipped) result.skipped_steps = static_cast<int64_t>(skipped->At(0));
  }
  ++step_;
  if (!options_.timeline_dir.empty()) PDIST_RETURN_IF_ERROR(WriteTimeline());
  return result;
}

absl::Status Engine::WriteTimeline() const {
  exec::TimelineRows rows;
  for (const auto& runner : runners_) rows.emplace_back(std::max<int64_t>(0, runner->rank()), runner->timeline()->Spans());
  if (backend_->process_per_rank) {  // its trace only; pdist-run draws the picture
    return WriteChromeTrace(options_.timeline_dir, rows.front().first, rows.front().second);
  }
  return WriteTimelines(options_.timeline_dir, rows, {.title = absl::StrCat("step ", step_ - 1)});
}

absl::StatusOr<double> Engine::EvalStep(const exec::Feeds& feeds) const {
  PDIST_RETURN_IF_ERROR(feed_checks_.Check(feeds, FeedUse::kEvaluation));
  std::vector<double> losses(runners_.size());
  PDIST_RETURN_IF_ERROR(OnEveryRank([&](size_t k, RankRunner& runner) -> absl::Status {
    PDIST_ASSIGN_OR_RETURN(losses[k], runner.Eval(feeds));
    return absl::OkStatus();
  }));
  return losses.front();
}

absl::Status Engine::PreparePredict() {
  PDIST_RETURN_IF_ERROR(predict_refused_);  // the check below fails once and for all
  if (runners_.front()->predict_prepared()) return absl::OkStatus();
  ir::Program predict;
  if (runners_.front()->rank() < 0) {
    predict = forward_.Clone();
    passes::SetEvalMode(predict);
    PDIST_RETURN_IF_ERROR(passes::PruneToOutputs(predict).status());
  } else {
    PDIST_ASSIGN_OR_RETURN(predict, passes::BuildPredictProgram(forward_, strategy_, train_, world_size_));
  }
  passes::ReshardPlanCache plans;
  for (const auto& runner : runners_) PDIST_RETURN_IF_ERROR(runner->PreparePredict(predict, plans));
  if (!backend_->buffered_sends && runners_.front()->options().pipeline.enabled()) {
    predict_refused_ = CheckMessagesBeforeRunning(StepKind::kPrediction, predict, runners_, plans);
    PDIST_RETURN_IF_ERROR(predict_refused_);
  }
  predict_feed_checks_ = FeedChecks::Of(predict);  // the labels, which it does not read, go unchecked
  return absl::OkStatus();
}

absl::StatusOr<std::map<std::string, exec::Tensor>> Engine::Predict(const exec::Feeds& feeds) {
  PDIST_RETURN_IF_ERROR(PreparePredict());
  PDIST_RETURN_IF_ERROR(predict_feed_checks_.Check(feeds, FeedUse::kPrediction));
  std::vector<std::map<std::string, exec::Tensor>> outputs(runners_.size());
  PDIST_RETURN_IF_ERROR(OnEveryRank([&](size_t k, RankRunner& runner) -> absl::Status {
    PDIST_ASSIGN_OR_RETURN(outputs[k], runner.Predict(feeds));
    return absl::OkStatus();
  }));
  return outputs.front();
}

absl::StatusOr<std::vector<StepResult>> Engine::Fit(const BatchSource& next_batch, int64_t steps,
                                                    const StepCallback& on_step) {
  std::vector<StepResult> results;
  for (int64_t i = 0; i < steps; ++i) {
    PDIST_ASSIGN_OR_RETURN(exec::Feeds feeds, next_batch());
    PDIST_ASSIGN_OR_RETURN(StepResult r, TrainStep(feeds));
    results.push_back(r);
    if (on_step && !on_step(r)) break;
  }
  return results;
}

absl::StatusOr<double> Engine::Evaluate(const BatchSource& next_batch, int64_t steps,
                                        const BatchCallback& on_batch) const {
  if (steps <= 0) return absl::InvalidArgumentError(absl::StrCat("evaluate: steps must be positive, got ", steps));
  double total = 0;
  int64_t done = 0;
  while (done < steps) {
    PDIST_ASSIGN_OR_RETURN(exec::Feeds feeds, next_batch());
    const auto start = std::chrono::steady_clock::now();
    PDIST_ASSIGN_OR_RETURN(double loss, EvalStep(feeds));
    total += loss;
    ++done;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (on_batch && !on_batch(done, loss, seconds)) break;
  }
  return total / static_cast<double>(done);
}

absl::StatusOr<int64_t> Engine::MaxOverRanks(int64_t value) const {
  if (!backend_->process_per_rank || world_size_ <= 1) return value;
  const exec::Tensor mine = exec::Tensor::Scalar(ir::DataType::kInt64, static_cast<double>(value));
  exec::Tensor largest = exec::Tensor::Scalar(ir::DataType::kInt64, 0);
  if (absl::Status s = worlds_.front()->AllReduce(mine, largest, exec::comm::ReduceOp::kMax); !s.ok()) {
    // The peers may still be inside it, or past it in the next collective: stop them all.
    s = Explained(s);
    AbortWorld(s);
    return s;
  }
  return static_cast<int64_t>(largest.At(0));
}

absl::Status Engine::Save(const std::string& path) const {
  // Every rank writes the pieces it owns; rank 0 writes the index once every rank has
  // (engine/sharded_checkpoint.h). No rank gathers the model, and any strategy can resume it.
  // A failure to write (a full disk, a bad path) is an error on every rank, agreed, not an abort:
  // the engine goes on training and can save elsewhere.
  const bool processes = backend_->process_per_rank && world_size_ > 1;
  // Rank 0 says which set of files every rank writes and, at the end, whether the index went in:
  // each rank reading the index itself could see an older one on a shared filesystem, and ranks
  // other than 0 returned OK from a save whose index failed.
  auto from_rank_zero = [&](int64_t value, const char* what) -> absl::StatusOr<int64_t> {
    if (!processes) return value;
    exec::Tensor code = exec::Tensor::Scalar(ir::DataType::kInt64, static_cast<double>(value));
    PDIST_RETURN_IF_ERROR(WithContext(Explained(worlds_.front()->Broadcast(code, 0)), absl::StrCat("checkpoint: ", what)));
    return static_cast<int64_t>(code.At(0));
  };
  // Rank 0 holds the directory's lock from choosing the set to the commit.
  std::optional<CheckpointSaveLock> lock;
  absl::StatusOr<RankFileSet> chosen = RankFileSet::kPlain;
  if (first_local_rank() == 0) {
    absl::StatusOr<CheckpointSaveLock> taken = CheckpointSaveLock::Take(path);
    if (taken.ok()) {
      lock.emplace(*std::move(taken));
      chosen = RankFileSetToWrite(path);
    } else {
      chosen = taken.status();
    }
  }
  PDIST_ASSIGN_OR_RETURN(const int64_t set, from_rank_zero(chosen.ok() ? static_cast<int64_t>(*chosen) : -1,
                                                           "choosing the set of files"));
  if (!chosen.ok()) return chosen.status();
  if (set < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot save into '", path, "': rank 0 refused it (its output says why)"));
  }
  const absl::Status wrote = OnEveryRank(
      [&](size_t, RankRunner& runner) -> absl::Status {
        PDIST_ASSIGN_OR_RETURN(exec::Workspace pieces, runner.LocalStateOnHost());
        return WriteRankShards(train_, runner.rank(), pieces, step_, path, static_cast<RankFileSet>(set));
      },
      RankWork::kLocal);
  // The slowest rank's files, however long storage takes, up to the checkpoint's own deadline.
  PDIST_RETURN_IF_ERROR(AgreeOnceAllAreDone(wrote, absl::StrCat("saving '", path, "'")));
  const absl::Status committed = first_local_rank() == 0
                                     ? WriteShardIndex(train_, world_size_, step_, path, static_cast<RankFileSet>(set))
                                     : absl::OkStatus();
  // Also: no rank saves again before the index names the files just written (the next save's
  // set is chosen from it).
  PDIST_ASSIGN_OR_RETURN(const int64_t written, from_rank_zero(committed.ok() ? 1 : 0, "waiting for the index"));
  if (!committed.ok()) return committed;
  if (written == 0) return absl::UnavailableError(absl::StrCat("checkpoint '", path, "': rank 0 could not write the index"));
  return absl::OkStatus();
}

absl::Status Engine::Load(const std::string& path) {
  // Every rank reads and checks its pieces, and only when every rank of the job has does any
  // take them: a damaged file on one stage's rank left the other stages loaded and this one
  // not, a model from two checkpoints that a save then wrote out as one. A failure is an error
  // on every rank, agreed, with the state as it was and the communicators working.
  std::vector<exec::Workspace> staged(runners_.size());
  std::vector<int64_t> steps(runners_.size(), 0);  // as each rank read it
  absl::Status read;
  if (IsShardedCheckpoint(path)) {
    // Each rank reads only the files whose pieces overlap its own.
    read = OnEveryRank(
        [&](size_t k, RankRunner& runner) -> absl::Status {
          PDIST_ASSIGN_OR_RETURN(Checkpoint mine, ReadShardsFor(path, runner.train_program(), runner.rank(), train_));
          PDIST_RETURN_IF_ERROR(runner.CheckLocalState(mine.tensors));
          steps[k] = mine.step;
          staged[k] = std::move(mine.tensors);
          return absl::OkStatus();
        },
        RankWork::kLocal);
  } else if (IsRankFileOfShardedCheckpoint(path)) {
    // Loaded as a checkpoint of its own, it lacked the other ranks' tensors. (Not returned at
    // once: every rank meets the others below.)
    read = absl::InvalidArgumentError(absl::StrCat(
        "'", path, "' is one rank's file of the sharded checkpoint '",
        std::filesystem::path(path).has_parent_path() ? std::filesystem::path(path).parent_path().string() : ".",
        "': load the directory"));
  } else {
    // A single-file checkpoint (written before sharded checkpoints): whole tensors, sliced here.
    absl::StatusOr<Checkpoint> ckpt = LoadCheckpoint(path);
    read = ckpt.status();
    const std::string source = absl::StrCat("checkpoint '", path, "'");
    for (size_t k = 0; read.ok() && k < runners_.size(); ++k) {
      absl::StatusOr<exec::Workspace> mine = runners_[k]->PiecesOfWhole(ckpt->tensors, source);
      read = mine.status();
      if (mine.ok()) staged[k] = *std::move(mine);
    }
    if (ckpt.ok()) steps.assign(steps.size(), ckpt->step);
  }
  // Reading may take as long as storage does on one rank: the slowest is waited for.
  PDIST_RETURN_IF_ERROR(AgreeOnceAllAreDone(read, absl::StrCat("loading '", path, "'")));
  // Each rank read the index itself: a save committing between two ranks' reads gave the
  // pipeline stages two steps' states, loaded without a word.
  const auto [low, high] = std::minmax_element(steps.begin(), steps.end());
  PDIST_ASSIGN_OR_RETURN(const int64_t newest, MaxOverRanks(*high));
  PDIST_ASSIGN_OR_RETURN(const int64_t oldest, MaxOverRanks(-*low));
  if (newest != -oldest) {
    return absl::FailedPreconditionError(absl::StrCat("loading '", path, "': the ranks read the checkpoints of steps ",
                                                      -oldest, " and ", newest,
                                                      " (a save committed while they read); nothing changed: load again"));
  }
  // On each rank's device beside the state (where a GPU may run out of memory), agreed, then
  // installed everywhere.
  std::vector<exec::Workspace> on_device(runners_.size());
  const absl::Status moved = OnEveryRank(
      [&](size_t k, RankRunner& runner) -> absl::Status {
        PDIST_ASSIGN_OR_RETURN(on_device[k], runner.OnDevice(staged[k]));
        return absl::OkStatus();
      },
      RankWork::kLocal);
  PDIST_RETURN_IF_ERROR(AgreeOnFailure(moved, absl::StrCat("loading '", path, "' onto the devices")));
  for (size_t k = 0; k < runners_.size(); ++k) runners_[k]->Install(std::move(on_device[k]));
  step_ = newest;
  return absl::OkStatus();
}

}  // namespace pdist::engine
