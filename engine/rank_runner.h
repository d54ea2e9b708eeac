// RankRunner: one rank of a training job — its local train and eval programs, their executors,
// its parameters and optimizer states, and its communicators.
//
// A single-rank job runs the global programs as they are (rank -1: no partition, no
// communicators). A distributed job partitions them for its rank and connects to the world;
// feeds arrive whole and each runner keeps its piece, so callers never see local shapes.
//
// The runner's state lives on its device (RunnerOptions::device). Everything that crosses its
// interface is on the host: feeds are moved to the device here, and predictions, states and
// checkpoint pieces come back to the host, so callers never see device tensors either.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "executor/comm/comm_groups.h"
#include "passes/distributed_programs.h"
#include "executor/executor.h"
#include "executor/timeline.h"
#include "ir/program.h"
#include "passes/reshard_plan.h"

namespace pdist::engine {

struct RunnerOptions {
  exec::Device device;                 // where the programs run and the state lives
  bool profile = false;                // time kernels
  bool overlap_communication = true;   // exec::ExecutorOptions::overlap_communication
  int64_t gradient_bucket_bytes = 0;   // passes/fuse_allreduce.h; 0: one all-reduce per gradient
  passes::KernelFusions fusions;       // of the training program (passes/distributed_programs.h)
  passes::PipelinePlan pipeline;               // micro-batches and schedule; disabled: whole-program steps
  bool timeline = false;               // record spans of jobs and communication (timeline())
};

class RankRunner {
 public:
  // `rank` < 0: run `train` and `eval` as they are. Otherwise partition them for `rank`.
  static absl::StatusOr<std::unique_ptr<RankRunner>> Create(const ir::Program& train, const ir::Program& eval,
                                                            int64_t rank, passes::ReshardPlanCache& plans,
                                                            const RunnerOptions& options);

  // Collective over the world: creates the communicators of every group of `meshes`.
  absl::Status Connect(std::shared_ptr<exec::comm::Communicator> world, const std::vector<ir::ProcessMesh>& meshes);
  absl::Status Initialize(uint64_t seed);

  // One step on whole feeds (this rank's pieces are cut here). Updates are made in place; a step
  // that fails after some of them leaves the runner refusing every use of its state until a
  // checkpoint is loaded (the error says so).
  absl::StatusOr<exec::RunResult> Train(const exec::Feeds& whole_feeds);
  absl::StatusOr<double> Eval(const exec::Feeds& whole_feeds);

  // Prediction: `predict` is the global prediction program (passes::BuildPredictProgram, or the
  // pruned forward of a single rank), partitioned here for this rank.
  absl::Status PreparePredict(const ir::Program& predict, passes::ReshardPlanCache& plans);
  bool predict_prepared() const { return predict_executor_ != nullptr; }
  // The program's outputs on whole feeds, whole (every rank holds every one), by name. Feeds
  // that the prediction program does not read (the labels) are ignored.
  absl::StatusOr<std::map<std::string, exec::Tensor>> Predict(const exec::Feeds& whole_feeds);

  // Every persistent tensor, whole, on the host. Collective in a distributed job.
  absl::StatusOr<exec::Workspace> WholeState();
  // This rank's pieces of every persistent tensor, on the host.
  absl::StatusOr<exec::Workspace> LocalStateOnHost() const;
  // This rank's piece of the persistent tensor `name` on the host; nullopt when there is none.
  absl::StatusOr<std::optional<exec::Tensor>> StateOnHost(const std::string& name) const;
  // Loading a checkpoint in two steps, so that the engine changes no rank before every rank has
  // read its pieces (a damaged file on one stage's rank left the others loaded): first this
  // rank's pieces of `whole` (host tensors; names and global types must match) or a check of
  // `local`, its own pieces (engine/sharded_checkpoint.h read them) — nothing changed — ...
  absl::StatusOr<exec::Workspace> PiecesOfWhole(const exec::Workspace& whole, const std::string& source) const;
  absl::Status CheckLocalState(const exec::Workspace& local) const;
  // ... then moved to the rank's device (a copy beside the state: a GPU may run out of memory
  // here, and the engine agrees on that too) ...
  absl::StatusOr<exec::Workspace> OnDevice(const exec::Workspace& host) const;
  // ... and made every persistent tensor, which cannot fail.
  void Install(exec::Workspace state);
  // OnDevice and Install at once (initialisation; one rank).
  absl::Status AdoptState(const exec::Workspace& host);

  int64_t rank() const { return rank_; }
  const ir::Program& train_program() const { return train_; }
  const ir::Program& eval_program() const { return eval_; }
  const ir::Program& predict_program() const { return predict_; }  // empty before PreparePredict
  const RunnerOptions& options() const { return options_; }
  const exec::Device& device() const { return options_.device; }
  exec::comm::CommGroups* groups() const { return groups_.get(); }
  // Spans of the last step, when RunnerOptions::timeline; nullptr otherwise.
  exec::TimelineRecorder* timeline() const { return timeline_.get(); }

 private:
  RankRunner(ir::Program train, ir::Program eval, int64_t rank, RunnerOptions options)
      : train_(std::move(train)), eval_(std::move(eval)), rank_(rank), options_(options) {}
  absl::Status CreateExecutors();
  // This rank's pieces of `whole`, on the runner's device.
  absl::StatusOr<exec::Feeds> LocalFeeds(const ir::Program& program, const exec::Feeds& whole) const;
  // A step of `executor`: whole-program, or the `jobs` over this rank's micro-batch feeds.
  absl::StatusOr<exec::RunResult> Step(const exec::Executor& executor, const ir::Program& program,
                                       const std::vector<ir::PipelineJob>& jobs, const exec::Feeds& whole_feeds,
                                       exec::Workspace& workspace);

  ir::Program train_;
  ir::Program eval_;
  int64_t rank_;
  RunnerOptions options_;
  std::shared_ptr<exec::comm::CommGroups> groups_;
  std::unique_ptr<exec::Executor> train_executor_;
  std::unique_ptr<exec::Executor> eval_executor_;
  ir::Program predict_;
  std::unique_ptr<exec::Executor> predict_executor_;
  exec::Workspace workspace_;  // on options_.device
  // Not OK once a training step failed after updating part of workspace_ in place (Train):
  // every use of the state is refused until a checkpoint replaces it (AdoptState).
  absl::Status broken_;
  std::vector<ir::PipelineJob> train_jobs_, eval_jobs_;  // empty: whole-program steps
  std::unique_ptr<exec::TimelineRecorder> timeline_;
};

}  // namespace pdist::engine
