// Engine: prepares a forward program for training (autodiff + optimizer), owns the parameters
// and optimizer states, and runs train / eval steps, fit loops and checkpoints.
//
//   PDIST_ASSIGN_OR_RETURN(ir::Program model, ir::LoadProgramAuto("model.pb"));
//   PDIST_ASSIGN_OR_RETURN(auto engine, Engine::Create(std::move(model), EngineOptions{}));
//   PDIST_ASSIGN_OR_RETURN(StepResult r, engine->TrainStep(feeds));
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/comm_backend.h"
#include "engine/feed_checks.h"
#include "engine/rank_runner.h"
#include "executor/executor.h"
#include "ir/program.h"
#include "passes/fuse_allreduce.h"
#include "passes/optimizer.h"
#include "strategy/strategy.h"

namespace pdist::engine {

struct LearningRateSchedule {
  double base = 1e-3;
  int64_t warmup_steps = 0;  // linear warm-up from base/warmup_steps
  int64_t decay_steps = 0;   // cosine decay to `min_ratio`·base over this many steps; 0 = constant
  double min_ratio = 0.1;
  double At(int64_t step) const;
};

// The most ranks an in-process backend ("inproc", "inproc-rendezvous") runs as threads.
inline constexpr int64_t kMaxInProcessRanks = 1024;
// The farthest collective deadline kept, in seconds (31 years): a longer one overflowed the
// nanoseconds a backend counts in.
inline constexpr double kLongestCollectiveTimeoutS = 1e9;

struct EngineOptions {
  passes::OptimizerConfig optimizer;
  LearningRateSchedule lr;
  uint64_t seed = 1;           // parameter initialisation
  std::string strategy_json;   // optional; see docs/strategy.md
  bool profile = false;        // time kernels: StepResult::op_seconds
  // How the strategy's ranks run (engine/comm_backend.h): "inproc" — all of them, as threads of
  // this process; "gloo" — this process is one rank (RANK, WORLD_SIZE, MASTER_ADDR/PORT or
  // PDIST_RENDEZVOUS_DIR from the environment, as pdist-run sets them); "nccl" — the same, one
  // rank per GPU.
  std::string backend = "inproc";
  // Where each rank runs (engine/device_choice.h): "cpu", "cuda" (the rank's GPU: LOCAL_RANK
  // under a launcher), "cuda:N", or a host device "cpu:N" (the host, with the state kept apart
  // as a GPU's is: for testing). A device this build or machine lacks is refused at Create, an
  // op without a kernel for it by name; several ranks on GPUs need backend "nccl".
  std::string device = "cpu";
  // How long a collective waits for the other ranks before the step fails (> 0; beyond
  // kLongestCollectiveTimeoutS, inf included, as long as that).
  double collective_timeout_s = 300;
  // How long the ranks that are processes wait for the slowest one to write or read its
  // checkpoint files (Save, Load), in place of the collective timeout: storage may take minutes
  // where a hung collective should fail in seconds (> 0, as given; inf as kLongestCollectiveTimeoutS).
  // It was at least the collective timeout, which no one had said.
  double checkpoint_timeout_s = 3600;
  // Run collectives on a communication stream beside the compute (exec::ExecutorOptions).
  bool overlap_communication = true;
  // Gradient all-reduces are fused into buckets of this many bytes (passes/fuse_allreduce.h);
  // 0: one per gradient. PyTorch DDP's default.
  int64_t gradient_bucket_bytes = passes::kDefaultGradientBucketBytes;
  // Update the parameters with multi-tensor merged ops (merged_adamw, merged_sgd,
  // merged_momentum; passes/fuse_optimizer.h): a launch per 24 parameters on a GPU instead of one
  // each; the same numbers bit for bit. Unset: on a
  // GPU, not on the CPU (where a launch costs nothing).
  std::optional<bool> fuse_optimizer;
  // Add a matmul's bias in its GEMM's epilogue (fused_gemm_epilogue; passes/fuse_gemm_epilogue.h):
  // on a GPU the product is written once instead of three times; on the CPU the same numbers bit
  // for bit. Unset: on a GPU, not on the CPU.
  std::optional<bool> fuse_gemm_epilogue;
  // Both from one word, as pdist-train's --fusions, the C API's and Python's `fusions` give them:
  // "auto" (unset: the device decides), "all", "none", or a comma list of "optimizer" and
  // "gemm-epilogue"; anything else is an error naming it.
  absl::Status SetFusions(const std::string& spec);
  // When set, every train step writes its timeline here (executor/timeline.h): a Chrome trace
  // per rank (rank<k>.trace.json) and, with in-process ranks, pipeline.svg; the last step's stay.
  std::string timeline_dir;
};

struct StepResult {
  int64_t step = 0;    // 0-based index of the step just run
  double loss = 0;
  double lr = 0;
  double seconds = 0;  // wall time of the step
  int64_t peak_bytes = 0;                // the largest over this process's ranks
  std::vector<int64_t> rank_peak_bytes;  // per local rank (local_ranks() order)
  // Per local rank, each kind's own peak: gradients and activations (exec::RunResult).
  std::vector<int64_t> rank_peak_gradient_bytes, rank_peak_activation_bytes;
  std::map<std::string, double> op_seconds;  // kernel time per op type (EngineOptions::profile)
  // Dynamic loss scaling (float16 amp): the scale after this step and the steps skipped so far
  // because a gradient overflowed; no scale without loss scaling.
  std::optional<double> loss_scale;
  int64_t skipped_steps = 0;
};

class Engine {
 public:
  // Takes the forward program (data inputs, parameters, ops, a scalar loss).
  static absl::StatusOr<std::unique_ptr<Engine>> Create(ir::Program forward, EngineOptions options);
  // With a process per rank (gloo), waits for the other ranks at a closing barrier (engine.cc).
  ~Engine();

  // One optimizer step on `feeds` (every data input of the model except the learning rate).
  absl::StatusOr<StepResult> TrainStep(const exec::Feeds& feeds);
  // The loss on `feeds`, parameters unchanged.
  absl::StatusOr<double> EvalStep(const exec::Feeds& feeds) const;

  // Runs `steps` train steps on batches from `next_batch`; `on_step` may return false to stop.
  using BatchSource = std::function<absl::StatusOr<exec::Feeds>()>;
  using StepCallback = std::function<bool(const StepResult&)>;
  absl::StatusOr<std::vector<StepResult>> Fit(const BatchSource& next_batch, int64_t steps, const StepCallback& on_step);
  // Mean loss over `steps` batches; `on_batch(k, loss, seconds)` after batch k (1, 2, ...) may
  // return false to stop, the mean then over the k batches done.
  using BatchCallback = std::function<bool(int64_t batch, double loss, double seconds)>;
  absl::StatusOr<double> Evaluate(const BatchSource& next_batch, int64_t steps, const BatchCallback& on_batch = {}) const;

  // The model's outputs (ir::ProgramOutput: the builders' and importer's "logits") on `feeds`,
  // whole, by name, dropout off; feeds the outputs do not need (the labels) may be left out.
  // The prediction program (passes::BuildPredictProgram) is made on the first call. Collective
  // under gloo: every rank calls it, and every rank gets every output.
  absl::StatusOr<std::map<std::string, exec::Tensor>> Predict(const exec::Feeds& feeds);

  // The largest of `value` over every rank: a world all-reduce when the ranks are processes,
  // `value` itself when they are this process's threads (one value for all). Collective: every
  // rank calls it, the same number of times; a failure aborts the world. pdist-train asks after
  // each step whether a rank was signalled, so that every rank stops after the same step and saves.
  absl::StatusOr<int64_t> MaxOverRanks(int64_t value) const;

  // A sharded checkpoint in the directory `path` (engine/sharded_checkpoint.h): every rank
  // writes the pieces it owns, rank 0 the index. Collective: every rank calls it.
  absl::Status Save(const std::string& path) const;
  // Restores parameters, optimizer states and the step counter from a sharded checkpoint saved
  // under any strategy (each rank reads only what overlaps its pieces), or from a single-file
  // checkpoint of earlier versions; every tensor must match. Collective: every rank calls it. No
  // rank's state changes unless every rank has read, checked and placed its pieces.
  absl::Status Load(const std::string& path);

  const ir::Program& forward_program() const { return forward_; }
  // The global training program (completed, when distributed).
  const ir::Program& train_program() const { return train_; }
  // Every parameter and optimizer state, whole. Collective under gloo: every rank calls it, and
  // rank 0 gets every tensor (the others those of their own pipeline stage).
  absl::StatusOr<exec::Workspace> WholeState() const;
  int64_t step() const { return step_; }
  // Ranks of the job, and the ones this process runs (all under inproc, one under gloo).
  int64_t world_size() const { return world_size_; }
  const std::vector<std::unique_ptr<RankRunner>>& local_ranks() const { return runners_; }
  // This process's first rank (0 for a single-rank or inproc job): the one that reports.
  int64_t first_local_rank() const;
  // Tokens (elements of the first data input) per step, for throughput.
  int64_t tokens_per_step() const { return tokens_per_step_; }

 private:
  Engine(ir::Program forward, EngineOptions options, const CommBackend* backend, exec::Device device);
  absl::Status Prepare();
  absl::Status PrepareSingleRank();
  absl::Status PrepareDistributed(const strategy::Strategy& strategy);
  absl::Status PreparePredict();
  // Whether the work OnEveryRank runs calls collectives: only then does one rank's failure abort
  // the job's communicators (a peer would wait for it); a failure of work that is each rank's
  // own (a checkpoint's files) leaves them working, and the ranks agree on it (AgreeOnFailure).
  enum class RankWork { kCommunicates, kLocal };
  // Runs fn on every local rank (threads under inproc). When one rank fails at work that
  // communicates, the job's communicators are aborted so that no other rank waits for it. The
  // first failure that is not such an abort is returned.
  absl::Status OnEveryRank(const std::function<absl::Status(size_t index, RankRunner&)>& fn,
                           RankWork work = RankWork::kCommunicates) const;
  // `mine`, this process's outcome of local work, agreed over the job (one 8-byte all-reduce
  // between ranks that are processes): OK where every rank's was, `mine` where it failed, else
  // an error that another rank failed at `what`. A failure of the work aborts no communicator:
  // the engine goes on (one of the agreement itself does, as every failed collective does).
  absl::Status AgreeOnFailure(const absl::Status& mine, const std::string& what) const;
  // The same once every rank is done with work of unbounded length (a checkpoint's files on
  // slow storage): ranks that are processes first wait for the slowest, up to the checkpoint
  // timeout, not the collective timeout.
  absl::Status AgreeOnceAllAreDone(const absl::Status& mine, const std::string& what) const;
  // Aborts the job's communicators after `cause` (which every later OnEveryRank names: an
  // aborted communicator cannot be used again).
  void AbortWorld(const absl::Status& cause) const;
  // `status` with what a user needs next: which option sets a deadline that passed, or which
  // earlier failure made the communicators unusable. The collectives under the collective
  // timeout go through it (OnEveryRank's, MaxOverRanks, a save's broadcasts); the waits under
  // the checkpoint timeout name that one themselves (AgreeOnceAllAreDone).
  absl::Status Explained(absl::Status status) const;
  absl::Status WriteTimeline() const;
  absl::Status SendOtherMeshesToRankZero(exec::Workspace& whole) const;

  ir::Program forward_;
  ir::Program train_;
  FeedChecks feed_checks_;          // of forward_'s data inputs: NaNs, index ranges
  FeedChecks predict_feed_checks_;  // of the prediction program's (PreparePredict)
  absl::Status predict_refused_;    // the prediction step's message order would hang (PreparePredict)
  EngineOptions options_;
  strategy::Strategy strategy_;  // parsed from options_.strategy_json
  const CommBackend* backend_;  // options_.backend's
  exec::Device device_;         // options_.device's (ChooseDevice)
  int64_t world_size_ = 1;
  std::vector<std::unique_ptr<RankRunner>> runners_;
  mutable absl::Status aborted_;  // why the communicators were aborted (AbortWorld); OK while they work
  std::vector<std::shared_ptr<exec::comm::Communicator>> worlds_;  // one per local rank
  int kernel_threads_per_rank_ = 1;
  int64_t step_ = 0;
  int64_t tokens_per_step_ = 0;
};

}  // namespace pdist::engine
