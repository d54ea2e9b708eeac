// Executor: runs one rank's local program on one device's kernels (ExecutorOptions::device).
//
//   PDIST_ASSIGN_OR_RETURN(Executor exec, Executor::Create(program, {}));
//   Workspace ws;  // persistent tensors: parameters and optimizer states, by value name
//   PDIST_RETURN_IF_ERROR(InitializeWorkspace(program, /*seed=*/1, ws));
//   PDIST_ASSIGN_OR_RETURN(RunResult r, exec.Run({{"tokens", t}, {"labels", l}}, ws));
//   r.loss  // the program's loss, if it has one
//
// Ops run in program order on the device's compute stream; collectives on its communication
// stream, ordered by events. Each intermediate tensor is released right after its last use
// (the memory planner computes last uses once, at Create), and the peak of live bytes is
// reported. Each `update` binding moves its new value into the workspace as soon as the old one
// is dead (MemoryPlan::install_after: in the optimizer's ops, an in-place update), the rest when
// the ops are done; a run that fails among the optimizer's ops leaves part of the workspace
// updated. Feeds and workspace tensors must be on the executor's device; the core computes
// nothing on the host itself (sums over micro-batches are the device's `add` kernel).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "executor/backend.h"
#include "executor/kernel.h"
#include "executor/job_plan.h"
#include "executor/memory_planner.h"
#include "executor/run_state.h"
#include "executor/tensor.h"
#include "ir/pipeline_job.h"
#include "ir/program.h"

namespace pdist::exec {

class TimelineRecorder;  // executor/timeline.h
class PipelinedStep;     // executor/pipeline_run.cc: RunJobs's state

// Persistent tensors (parameters, optimizer states) by value name.
using Workspace = std::map<std::string, Tensor>;
// Per-step inputs (data) by value name.
using Feeds = std::map<std::string, Tensor>;

struct ExecutorOptions {
  // Where the program runs; Create fails, saying why, when this build or machine cannot run it.
  Device device = Device::Cpu();
  // Values (by id) whose tensors Run returns in RunResult::fetched, besides the loss.
  std::vector<int64_t> fetch_ids;
  // Time every kernel and report the totals per op type in RunResult::op_seconds.
  bool profile = false;
  // The rank's communicators, for the collective ops of a partitioned program.
  std::shared_ptr<comm::CommGroups> comm_groups;
  // Run the ops that communicate on a communication stream (a worker thread, in program order)
  // while the compute ops go on, waiting only where a result is needed: a gradient all-reduce
  // overlaps the rest of the backward pass. Off: every op runs in turn on the calling thread.
  bool overlap_communication = true;
};

struct RunResult {
  double loss = 0;       // valid when the program has a loss
  bool has_loss = false;
  std::map<int64_t, Tensor> fetched;  // by value id
  int64_t peak_bytes = 0;  // peak of live intermediate bytes (persistent tensors excluded)
  // Each kind's own peak (executor/run_state.h's LiveBytes): gradients, and the rest.
  int64_t peak_gradient_bytes = 0;
  int64_t peak_activation_bytes = 0;
  std::map<std::string, double> op_seconds;  // per op type, when ExecutorOptions::profile
};

class Executor {
 public:
  // Checks that the device is available and that every op has a kernel for it; plans memory.
  static absl::StatusOr<Executor> Create(const ir::Program& program, ExecutorOptions options = {});

  // Runs one step. Every data argument must be fed with its exact type; every parameter and
  // state must be in `workspace` (see InitializeWorkspace). With a `timeline`, each run of ops of
  // one role is a span ("F", "B", "O": forward, backward, optimizer), as a pipelined step's jobs
  // are, and communication and waiting get their spans too.
  absl::StatusOr<RunResult> Run(const Feeds& feeds, Workspace& workspace, TimelineRecorder* timeline = nullptr) const;

  // Runs one pipelined step (ir/pipeline_job.h): each job runs the ops of its (role, chunk) on
  // the tensors of its micro-batch; what the optimizer reads from the micro-batches (gradients,
  // the loss) is summed over them, and the optimizer job runs once on the sums. Data inputs come
  // from `micro_feeds[micro_batch]` (the optimizer's from micro-batch 0). RunResult::loss is the
  // summed loss; peak_bytes counts every micro-batch's live tensors together, so it shows what
  // the schedule keeps in flight. Spans of jobs and communication go to `timeline` if given.
  absl::StatusOr<RunResult> RunJobs(const std::vector<ir::PipelineJob>& jobs, const std::vector<Feeds>& micro_feeds,
                                    Workspace& workspace, TimelineRecorder* timeline = nullptr) const;

  const MemoryPlan& memory_plan() const { return plan_; }
  const JobPlan& job_plan() const { return job_plan_; }

 private:
  friend class PipelinedStep;
  using OpHook = std::function<absl::Status(size_t op_index)>;
  Executor(const ir::Program& program, ExecutorOptions options, Backend* backend, MemoryPlan plan, JobPlan job_plan,
           std::vector<const KernelFn*> kernels, std::vector<bool> on_comm_stream,
           std::vector<std::vector<bool>> reads_operand)
      : program_(&program), options_(std::move(options)), backend_(backend), plan_(std::move(plan)),
        job_plan_(std::move(job_plan)), kernels_(std::move(kernels)), on_comm_stream_(std::move(on_comm_stream)),
        reads_operand_(std::move(reads_operand)) {}
  // Builds comm_stream_of_ (at Create).
  void PlanCommStreams();
  // Builds accumulate_ (at Create).
  void PlanAccumulation();
  // Builds overwrites_ (at Create).
  void PlanOverwrites();
  // The run's compute stream, opened on the executor's device, and its communication streams'
  // slots; with a timeline, its clock anchored on the compute stream.
  void OpenStreams(RunState& state) const;
  // sum += x for the value `id` summed over micro-batches, into a fresh tensor (x may be a view
  // of a tensor still in use), by the device's `add` kernel.
  absl::Status Accumulate(int64_t id, Tensor& sum, const Tensor& x, RunState& state) const;
  absl::Status BindArguments(const Feeds& feeds, const Workspace& workspace, ValueTable& table) const;
  // Runs the ops `indices` (in that order) on `table`, freeing after op i what release_after[i]
  // lists; `after_op` (optional) sees each op once its compute results are in the table.
  absl::Status RunOps(const std::vector<size_t>& indices, const std::vector<std::vector<int64_t>>& release_after,
                      ValueTable& table, RunState& state, const OpHook& after_op) const;
  void SubmitToStream(size_t i, const std::vector<int64_t>& last_uses, ValueTable& table, RunState& state) const;
  // Frees the values `ids` (an op's last uses) from `table`, waiting for those the stream owes.
  absl::Status Release(const std::vector<int64_t>& ids, ValueTable& table, RunState& state) const;
  // Installs the updates MemoryPlan::install_after lists for op i into state.workspace.
  void InstallUpdates(size_t i, ValueTable& table, RunState& state) const;
  absl::Status Await(int64_t id, ValueTable& table, RunState& state) const;
  // Waits for the stream and every value it owes; fails with a communicator's recorded error.
  absl::Status Drain(std::vector<ValueTable*> tables, RunState& state) const;
  absl::Status Fail(absl::Status status, RunState& state) const;
  absl::StatusOr<RunResult> Finish(const std::vector<Tensor>& loss_source, const std::vector<Tensor>& values, RunState& state,
                   Workspace& workspace) const;
  // Runs op `index`'s kernel on `stream` and checks its results' types; times it into op_seconds
  // if given — until the device has run it on the compute stream, until it is enqueued on a
  // communication stream (`compute` false: a device wait there could hold the rank's one host
  // thread inside a send until the peer receives). `keep_alive` receives the kernel's
  // temporaries (KernelContext::Scratch); `donated` holds, per result, a dying operand's storage
  // it may be written over (KernelContext::Donate).
  absl::Status RunKernel(size_t index, const ir::Operation& op, int64_t micro_batch, std::vector<const Tensor*> inputs,
                         std::vector<Tensor>& outputs, Stream* stream, std::map<std::string, double>* op_seconds,
                         std::vector<Tensor>* keep_alive = nullptr, std::vector<Tensor> donated = {},
                         bool compute = true) const;
  // Runs `kernel` for `op` with the executor's device, on `stream`; an allocation that fails
  // becomes ResourceExhausted naming the op.
  absl::Status CallKernel(const KernelFn& kernel, const ir::Operation& op, int64_t micro_batch,
                          std::vector<const Tensor*> inputs, std::vector<Tensor>& outputs, Stream* stream,
                          std::vector<Tensor>* keep_alive = nullptr, std::vector<Tensor> donated = {}) const;
  // Per result of op `index`, the storage of an operand that dies at it (in `release`) and that
  // nothing else holds, where the op's kernels may write that result over it.
  std::vector<Tensor> Donations(size_t index, const std::vector<int64_t>& release, ValueTable& table) const;

  const ir::Program* program_;
  ExecutorOptions options_;
  Backend* backend_;
  MemoryPlan plan_;
  JobPlan job_plan_;
  std::vector<const KernelFn*> kernels_;  // per op, in program order
  std::vector<bool> on_comm_stream_;      // per op
  // Per op on a communication stream, which one (RunState::comm): 0 for the collectives, which
  // every rank of a group issues in one order; 1 + k for the k-th point-to-point channel, so
  // that a send held until its receive runs (NCCL's) holds only its own direction.
  std::vector<size_t> comm_stream_of_;
  std::vector<std::string> comm_stream_names_;  // "comm", "p2p 0>1": timeline lanes
  // Per op and operand: whether the kernel reads its data (ir::ReadsOperand), looked up once.
  std::vector<std::vector<bool>> reads_operand_;
  // Per op, (result, operand) pairs its kernels may write over (ir::OverwritableOperands).
  std::vector<std::vector<std::pair<size_t, size_t>>> overwrites_;
  // `%sum = add %a, %b` for each value summed over micro-batches (by value id), and the
  // device's add kernel: the one computation the executor core itself asks for.
  std::shared_ptr<const ir::Program> accumulate_;
  std::map<int64_t, const ir::Operation*> accumulate_op_;
  const KernelFn* add_kernel_ = nullptr;
};

// Creates every parameter and optimizer state of `program` from its `init` string, with a
// counter-based RNG keyed by (seed, value name): the same name and seed give the same tensor
// whatever else the program contains. Existing entries are kept.
absl::Status InitializeWorkspace(const ir::Program& program, uint64_t seed, Workspace& workspace);

// The same for a partitioned program of `rank`: each persistent value is that rank's piece
// (its DistAttr says of which global tensor), and gets exactly the elements the whole tensor
// has there, so every strategy starts from the same global model for the same seed.
absl::Status InitializeLocalWorkspace(const ir::Program& local, uint64_t seed, int64_t rank, Workspace& workspace);

// Kernel threads (OpenMP) of the calling thread's parallel regions. Ranks that run as threads
// of one process share the cores: each rank thread takes its share.
void SetKernelThreadsOfThisThread(int threads);
int KernelThreadsOfThisThread();

}  // namespace pdist::exec
