// RankRunner: programs, executors, state and communicators of one rank.
#include "engine/rank_runner.h"

#include "absl/strings/str_cat.h"
#include "engine/checkpoint.h"
#include "engine/shard_io.h"
#include "executor/backend.h"
#include "ir/dist/local_slice.h"
#include "ir/status.h"

namespace pdist::engine {

absl::StatusOr<std::unique_ptr<RankRunner>> RankRunner::Create(const ir::Program& train, const ir::Program& eval,
                                                               int64_t rank, passes::ReshardPlanCache& plans,
                                                               const RunnerOptions& options) {
  std::unique_ptr<RankRunner> runner;
  if (rank < 0) {
    runner.reset(new RankRunner(train.Clone(), eval.Clone(), rank, options));
  } else {
    PDIST_ASSIGN_OR_RETURN(ir::Program local_train,
                           passes::LocalProgram(train, passes::RankPipeline(rank, options.gradient_bucket_bytes, options.fusions),
                                                 plans));
    PDIST_ASSIGN_OR_RETURN(ir::Program local_eval, passes::LocalProgram(eval, passes::RankPipeline(rank, {}), plans));
    runner.reset(new RankRunner(std::move(local_train), std::move(local_eval), rank, options));
  }
  if (options.pipeline.enabled()) {
    PDIST_ASSIGN_OR_RETURN(runner->train_jobs_, options.pipeline.JobsOf(rank, /*forward_only=*/false));
    PDIST_ASSIGN_OR_RETURN(runner->eval_jobs_, options.pipeline.JobsOf(rank, /*forward_only=*/true));
  }
  if (options.timeline) runner->timeline_ = std::make_unique<exec::TimelineRecorder>();
  PDIST_RETURN_IF_ERROR(runner->CreateExecutors());
  return runner;
}

absl::Status RankRunner::CreateExecutors() {
  exec::ExecutorOptions options;
  options.device = options_.device;
  options.profile = options_.profile;
  options.overlap_communication = options_.overlap_communication;
  options.comm_groups = groups_;
  PDIST_ASSIGN_OR_RETURN(exec::Executor train, exec::Executor::Create(train_, options));
  options.profile = false;
  PDIST_ASSIGN_OR_RETURN(exec::Executor eval, exec::Executor::Create(eval_, options));
  train_executor_ = std::make_unique<exec::Executor>(std::move(train));
  eval_executor_ = std::make_unique<exec::Executor>(std::move(eval));
  return absl::OkStatus();
}

absl::Status RankRunner::Connect(std::shared_ptr<exec::comm::Communicator> world,
                                 const std::vector<ir::ProcessMesh>& meshes) {
  // A channel per direction this rank sends or receives in (a predicting step's are among the
  // training step's: the forward's sends).
  std::vector<exec::comm::ChannelKey> channels = exec::comm::ChannelsOf(train_, rank_);
  for (const auto& channel : exec::comm::ChannelsOf(eval_, rank_)) channels.push_back(channel);
  PDIST_ASSIGN_OR_RETURN(groups_, exec::comm::CommGroups::Create(std::move(world), meshes, std::move(channels)));
  return CreateExecutors();  // again, now with the communicators
}

absl::Status RankRunner::Initialize(uint64_t seed) {
  // Made on the host (the initialisers are host code, the same numbers for every device).
  exec::Workspace host;
  if (rank_ < 0) {
    PDIST_RETURN_IF_ERROR(exec::InitializeWorkspace(train_, seed, host));
  } else {
    PDIST_RETURN_IF_ERROR(exec::InitializeLocalWorkspace(train_, seed, rank_, host));
  }
  return AdoptState(host);
}

absl::StatusOr<exec::Workspace> RankRunner::OnDevice(const exec::Workspace& host) const {
  exec::Workspace next;
  for (const auto& [name, tensor] : host) {
    absl::StatusOr<exec::Tensor> moved = exec::ToDevice(tensor, options_.device);
    if (!moved.ok()) return WithContext(moved.status(), absl::StrCat("moving '", name, "' to ", options_.device.ToString()));
    next[name] = *std::move(moved);
  }
  return next;
}

void RankRunner::Install(exec::Workspace state) {
  workspace_ = std::move(state);
  broken_ = absl::OkStatus();  // a whole new state: whatever a failed step left is gone
}

absl::Status RankRunner::AdoptState(const exec::Workspace& host) {
  PDIST_ASSIGN_OR_RETURN(exec::Workspace next, OnDevice(host));
  Install(std::move(next));
  return absl::OkStatus();
}

absl::StatusOr<exec::Feeds> RankRunner::LocalFeeds(const ir::Program& program, const exec::Feeds& whole) const {
  exec::Feeds local;
  for (const auto& [name, tensor] : whole) {
    const ir::Value* arg = program.FindArgument(name);
    absl::StatusOr<exec::Tensor> piece = tensor;  // the executor reports unknown feeds
    if (rank_ >= 0 && arg != nullptr && arg->dist_attr()) piece = SliceForRank(tensor, *arg->dist_attr(), rank_);
    if (piece.ok()) piece = exec::ToDevice(*piece, options_.device);
    if (!piece.ok()) return WithContext(piece.status(), absl::StrCat("feed '", name, "'"));
    local[name] = *std::move(piece);
  }
  return local;
}

absl::StatusOr<exec::RunResult> RankRunner::Step(const exec::Executor& executor, const ir::Program& program,
                                                  const std::vector<ir::PipelineJob>& jobs,
                                                  const exec::Feeds& whole_feeds, exec::Workspace& workspace) {
  if (jobs.empty()) {
    PDIST_ASSIGN_OR_RETURN(exec::Feeds feeds, LocalFeeds(program, whole_feeds));
    return executor.Run(feeds, workspace, timeline_.get());
  }
  const passes::PipelinePlan& pipeline = options_.pipeline;
  PDIST_ASSIGN_OR_RETURN(std::vector<exec::Feeds> micro,
                         SplitMicroBatchFeeds(whole_feeds, pipeline.split_inputs, pipeline.micro_batches));
  for (exec::Feeds& feeds : micro) {
    PDIST_ASSIGN_OR_RETURN(feeds, LocalFeeds(program, feeds));
  }
  return executor.RunJobs(jobs, micro, workspace, timeline_.get());
}

absl::StatusOr<exec::RunResult> RankRunner::Train(const exec::Feeds& whole_feeds) {
  PDIST_RETURN_IF_ERROR(broken_);
  // The executor installs each updated tensor as soon as its old value is dead (an in-place
  // update: one copy of the parameters and optimizer states, not two, at the step's end), so the
  // step runs on the runner's own workspace. A step that fails before its optimizer ops leaves
  // every tensor as it was; one that fails among them leaves some updated, and the runner then
  // refuses to go on until a checkpoint is loaded.
  std::map<std::string, const void*> before;
  for (const auto& [name, tensor] : workspace_) before[name] = tensor.buffer_id();
  absl::StatusOr<exec::RunResult> run = Step(*train_executor_, train_, train_jobs_, whole_feeds, workspace_);
  if (!run.ok()) {
    int64_t updated = 0;
    for (const auto& [name, id] : before) updated += workspace_[name].buffer_id() != id ? 1 : 0;
    if (updated > 0) {
      broken_ = absl::FailedPreconditionError(absl::StrCat(
          "rank ", rank_, ": a training step failed after it had updated ", updated, " of ", before.size(),
          " parameters and optimizer states in place (", run.status().message(),
          "); load a checkpoint to go on"));
    }
  }
  return run;
}

absl::StatusOr<double> RankRunner::Eval(const exec::Feeds& whole_feeds) {
  PDIST_RETURN_IF_ERROR(broken_);
  exec::Workspace ws = workspace_;
  PDIST_ASSIGN_OR_RETURN(exec::RunResult run, Step(*eval_executor_, eval_, eval_jobs_, whole_feeds, ws));
  return run.loss;
}

absl::Status RankRunner::PreparePredict(const ir::Program& predict, passes::ReshardPlanCache& plans) {
  if (rank_ < 0) {
    predict_ = predict.Clone();
  } else {
    PDIST_ASSIGN_OR_RETURN(predict_, passes::LocalProgram(predict, passes::RankPipeline(rank_, {}), plans));
  }
  exec::ExecutorOptions options;
  options.device = options_.device;
  options.overlap_communication = options_.overlap_communication;
  options.comm_groups = groups_;
  for (const ir::ProgramOutput& o : predict_.outputs()) options.fetch_ids.push_back(o.value->id());
  PDIST_ASSIGN_OR_RETURN(exec::Executor executor, exec::Executor::Create(predict_, options));
  predict_executor_ = std::make_unique<exec::Executor>(std::move(executor));
  return absl::OkStatus();
}

absl::StatusOr<std::map<std::string, exec::Tensor>> RankRunner::Predict(const exec::Feeds& whole_feeds) {
  PDIST_RETURN_IF_ERROR(broken_);
  if (predict_executor_ == nullptr) return absl::FailedPreconditionError("predict: PreparePredict first");
  exec::Feeds read;
  for (const auto& [name, tensor] : whole_feeds) {
    if (predict_.FindArgument(name) != nullptr) read[name] = tensor;
  }
  PDIST_ASSIGN_OR_RETURN(exec::Feeds feeds, LocalFeeds(predict_, read));
  exec::Workspace ws = workspace_;
  const std::vector<ir::PipelineJob> jobs = options_.pipeline.PredictJobs();
  PDIST_ASSIGN_OR_RETURN(exec::RunResult run, jobs.empty() ? predict_executor_->Run(feeds, ws, timeline_.get())
                                                           : predict_executor_->RunJobs(jobs, {feeds}, ws, timeline_.get()));
  std::map<std::string, exec::Tensor> outputs;
  for (const ir::ProgramOutput& o : predict_.outputs()) {
    PDIST_ASSIGN_OR_RETURN(outputs[o.name], exec::ToDevice(run.fetched.at(o.value->id()), exec::Device::Cpu()));
  }
  return outputs;
}

absl::StatusOr<exec::Workspace> RankRunner::LocalStateOnHost() const {
  PDIST_RETURN_IF_ERROR(broken_);
  exec::Workspace host;
  for (const auto& [name, tensor] : workspace_) {
    PDIST_ASSIGN_OR_RETURN(host[name], exec::ToDevice(tensor, exec::Device::Cpu()));
  }
  return host;
}

absl::StatusOr<std::optional<exec::Tensor>> RankRunner::StateOnHost(const std::string& name) const {
  PDIST_RETURN_IF_ERROR(broken_);
  auto it = workspace_.find(name);
  if (it == workspace_.end()) return std::nullopt;
  PDIST_ASSIGN_OR_RETURN(exec::Tensor host, exec::ToDevice(it->second, exec::Device::Cpu()));
  return host;
}

absl::StatusOr<exec::Workspace> RankRunner::WholeState() {
  PDIST_ASSIGN_OR_RETURN(exec::Workspace local, LocalStateOnHost());
  if (rank_ < 0) return local;
  exec::Workspace whole;
  // Program order, the same on every rank: each gather is a collective.
  for (const ir::Value* arg : train_.block().arguments()) {
    if (!arg->is_persistent()) continue;
    PDIST_ASSIGN_OR_RETURN(whole[arg->name()], GatherWhole(local.at(arg->name()), *arg->dist_attr(), *groups_));
  }
  return whole;
}

absl::Status RankRunner::CheckLocalState(const exec::Workspace& local) const {
  for (const ir::Value* arg : train_.block().arguments()) {
    if (!arg->is_persistent()) continue;
    auto it = local.find(arg->name());
    if (it == local.end() || it->second.type() != arg->type()) {
      return absl::InternalError(absl::StrCat("rank ", rank_, ": the checkpoint's piece of '", arg->name(), "' is ",
                                              it == local.end() ? "missing" : it->second.type().ToString(),
                                              ", the rank holds ", arg->type().ToString()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<exec::Workspace> RankRunner::PiecesOfWhole(const exec::Workspace& whole, const std::string& source) const {
  exec::Workspace next;
  for (const ir::Value* arg : train_.block().arguments()) {
    if (!arg->is_persistent()) continue;
    auto it = whole.find(arg->name());
    if (it == whole.end()) {
      return absl::InvalidArgumentError(absl::StrCat(source, " has no tensor '", arg->name(), "'"));
    }
    const ir::TensorType global =
        rank_ < 0 ? arg->type() : ir::TensorType{ir::GlobalShapeOf(*arg->dist_attr(), arg->type().shape), arg->type().dtype};
    if (it->second.type() != global) return CheckpointTypeMismatch(source, arg->name(), it->second.type(), global);
    if (rank_ < 0) {
      next[arg->name()] = it->second;
    } else {
      PDIST_ASSIGN_OR_RETURN(next[arg->name()], SliceForRank(it->second, *arg->dist_attr(), rank_));
    }
  }
  for (const auto& [name, tensor] : whole) {
    if (!next.count(name)) {
      return UnknownCheckpointTensor(source, name, train_);
    }
  }
  return next;
}

}  // namespace pdist::engine
