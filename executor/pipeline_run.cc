// Executor::RunJobs: a pipelined step — the prologue once, per-micro-batch tables, sums over
// micro-batches, the optimizer once, spans for the timeline.
#include <algorithm>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "executor/executor.h"
#include "executor/timeline.h"
#include "ir/op_def.h"
#include "ir/pipeline_job.h"
#include "ir/status.h"

namespace pdist::exec {
namespace {

bool SplitsBackward(const std::vector<ir::PipelineJob>& jobs) {
  for (const ir::PipelineJob& job : jobs) {
    if (job.kind == ir::JobKind::kBackwardInput || job.kind == ir::JobKind::kBackwardWeight) return true;
  }
  return false;
}

// The gradient all-reduces (and ZeRO 2 and 3's reduce-scatters) of the optimizer job that may
// start before it: each as soon as the last micro-batch has added its share to every gradient it
// reduces, so that it overlaps the rest of that micro-batch's backward (as Megatron-LM overlaps
// the last micro-batch's), not the optimizer job's start. Only reductions of gradient sums
// qualify (hybrid ZeRO's all-reduce of a reduce-scattered shard waits for the optimizer job):
// every rank of their group holds the same stage and runs the same jobs, so all of them move the
// same collectives ahead of the same stream ops, and each reaches them once its own backward has;
// a collective that a rank of another stage waits on (the loss's send) stays in O, where starting
// it early could deadlock. They go on the stream in program order.
struct EarlyGradientSync {
  std::vector<size_t> ops;                   // optimizer-job ops, in program order
  std::vector<std::vector<int64_t>> inputs;  // the sums each reads
  std::map<int64_t, int64_t> shares_left;    // per summed gradient: jobs still to add to it
  size_t submitted = 0;                      // ops[0, submitted) are on the stream

  bool Ready(size_t k) const {
    for (int64_t id : inputs[k]) {
      if (shares_left.at(id) > 0) return false;
    }
    return true;
  }
};

EarlyGradientSync PlanEarlyGradientSync(const ir::Program& program, const JobPlan& plan,
                                        const std::vector<bool>& on_comm_stream,
                                        const std::vector<ir::PipelineJob>& jobs) {
  EarlyGradientSync early;
  const auto& ops = program.block().ops();
  for (const ir::PipelineJob& job : jobs) {
    if (job.kind == ir::JobKind::kOptimizer) continue;
    for (size_t i : plan.OpsOf(job)) {
      for (const ir::Value* r : ops[i]->results()) {
        if (plan.accumulated.count(r->id())) ++early.shares_left[r->id()];
      }
    }
  }
  auto is_gradient = [&](const ir::Value* v) {
    if (v == nullptr || !early.shares_left.count(v->id()) || v->producer() == nullptr) return false;
    return ir::IsBackwardRole(v->producer()->role());
  };
  for (size_t i : plan.OpsOf({.kind = ir::JobKind::kOptimizer})) {
    if (!on_comm_stream[i]) continue;
    const ir::Operation& op = *ops[i];
    const ir::OpDef* def = ir::OpRegistry::Global().Find(op.type());
    const bool reduces = def != nullptr && (def->collective == ir::CollectiveKind::kAllReduce ||
                                            def->collective == ir::CollectiveKind::kReduceScatter);
    const bool gradient_sync = reduces && op.num_operands() > 0 &&
                               std::all_of(op.operands().begin(), op.operands().end(), is_gradient);
    if (!gradient_sync) continue;
    early.ops.push_back(i);
    std::vector<int64_t> ids;
    for (const ir::Value* v : op.operands()) ids.push_back(v->id());
    early.inputs.push_back(std::move(ids));
  }
  return early;
}

}  // namespace

// One pipelined step: the jobs in order, each on its micro-batch's table of values (or, for the
// optimizer job, on the sums over micro-batches), the gradient syncs started as their sums
// complete, each micro-batch's tensors freed after its last job.
class PipelinedStep {
 public:
  PipelinedStep(const Executor& executor, const std::vector<ir::PipelineJob>& jobs,
                const std::vector<Feeds>& micro_feeds, Workspace& workspace, TimelineRecorder* timeline)
      : ex_(executor), program_(*executor.program_), jobs_(jobs), micro_feeds_(micro_feeds), workspace_(workspace),
        num_values_(static_cast<size_t>(program_.num_values())), tables_(micro_feeds.size()), sums_(num_values_),
        sum_handed_over_(num_values_, false), started_early_(program_.block().ops().size(), false) {
    state_.timeline = timeline;
    state_.workspace = &workspace;
  }

  absl::StatusOr<RunResult> Run() {
    PDIST_RETURN_IF_ERROR(CheckJobs());
    ex_.OpenStreams(state_);
    release_ = SplitsBackward(jobs_) ? &ex_.job_plan_.release_split : &ex_.job_plan_.release_whole;
    if (ex_.options_.overlap_communication) {
      early_ = PlanEarlyGradientSync(program_, ex_.job_plan_, ex_.on_comm_stream_, jobs_);
    }
    if (absl::Status s = RunPrologue(); !s.ok()) return ex_.Fail(s, state_);
    for (const ir::PipelineJob& job : jobs_) {
      // Whatever fails once the streams have work (a sum's allocation, a later micro-batch's
      // feeds) stops the peers too, which may be waiting for this rank's next message.
      if (absl::Status s = RunJob(job); !s.ok()) return ex_.Fail(s, state_);
    }
    return Finish();
  }

 private:
  // Every job names a micro-batch and chunk of this step; counts each micro-batch's jobs.
  absl::Status CheckJobs() {
    const auto micro_batches = static_cast<int64_t>(micro_feeds_.size());
    if (micro_batches < 1) return absl::InvalidArgumentError("pipelined step: no micro-batch feeds");
    PDIST_RETURN_IF_ERROR(ex_.job_plan_.unsummable);
    jobs_left_.assign(static_cast<size_t>(micro_batches), 0);
    for (size_t k = 0; k < jobs_.size(); ++k) {
      const ir::PipelineJob& job = jobs_[k];
      // Updates are installed in place during O (MemoryPlan::install_after): nothing may run after it.
      if (job.kind == ir::JobKind::kOptimizer && k + 1 != jobs_.size()) {
        return absl::InvalidArgumentError(absl::StrCat("pipelined step: the optimizer job must come last, not at ",
                                                       k + 1, " of ", jobs_.size(), " jobs"));
      }
      if (job.kind == ir::JobKind::kOptimizer) continue;
      if (job.micro_batch < 0 || job.micro_batch >= micro_batches || job.chunk < 0 ||
          job.chunk >= ex_.job_plan_.chunks) {
        return absl::InvalidArgumentError(absl::StrCat("pipelined step: job ", job.ToString(), " is outside ",
                                                       micro_batches, " micro-batches × ", ex_.job_plan_.chunks,
                                                       " chunks"));
      }
      ++jobs_left_[static_cast<size_t>(job.micro_batch)];
    }
    return absl::OkStatus();
  }

  // The ops of role prologue, once, before every job: on every rank first, so its messages
  // (a tied table sent to the last stage) meet in one order everywhere.
  absl::Status RunPrologue() {
    const std::vector<size_t>& ops = ex_.job_plan_.prologue;
    if (ops.empty()) return absl::OkStatus();
    prologue_table_ = std::make_unique<ValueTable>(num_values_);
    PDIST_RETURN_IF_ERROR(ex_.BindArguments(micro_feeds_[0], workspace_, *prologue_table_));
    ScopedSpan span(state_.timeline, {.name = "prologue", .category = "prologue", .micro_batch = -1, .chunk = -1},
                    *state_.compute);
    return ex_.RunOps(ops, *release_, *prologue_table_, state_, nullptr);
  }

  // What the prologue made for the jobs, into `table` as the arguments are (waiting for what a
  // stream still owes: the received table).
  absl::Status BindStepValues(ValueTable& table) {
    for (int64_t id : ex_.job_plan_.step_values) {
      PDIST_RETURN_IF_ERROR(ex_.Await(id, *prologue_table_, state_));
      table.values[static_cast<size_t>(id)] = prologue_table_->values[static_cast<size_t>(id)];
    }
    return absl::OkStatus();
  }

  absl::Status OpenOptimizerTable() {
    if (optimizer_table_ != nullptr) return absl::OkStatus();
    optimizer_table_ = std::make_unique<ValueTable>(num_values_);
    PDIST_RETURN_IF_ERROR(ex_.BindArguments(micro_feeds_[0], workspace_, *optimizer_table_));
    return BindStepValues(*optimizer_table_);
  }

  // The table `job` runs on: its micro-batch's (bound to its feeds on first use), or the
  // optimizer's, holding the sums not yet handed to an early gradient sync.
  absl::StatusOr<ValueTable*> TableFor(const ir::PipelineJob& job) {
    if (job.kind == ir::JobKind::kOptimizer) {
      PDIST_RETURN_IF_ERROR(OpenOptimizerTable());
      for (int64_t id : ex_.job_plan_.accumulated) {
        const auto v = static_cast<size_t>(id);
        if (!sum_handed_over_[v]) optimizer_table_->values[v] = sums_[v];
      }
      return optimizer_table_.get();
    }
    std::unique_ptr<ValueTable>& table = tables_[static_cast<size_t>(job.micro_batch)];
    if (table == nullptr) {
      table = std::make_unique<ValueTable>(num_values_);
      PDIST_RETURN_IF_ERROR(
          ex_.BindArguments(micro_feeds_[static_cast<size_t>(job.micro_batch)], workspace_, *table));
      PDIST_RETURN_IF_ERROR(BindStepValues(*table));
    }
    return table.get();
  }

  // Puts the gradient syncs whose sums are complete on the stream, as the optimizer job would,
  // and frees their inputs after them as it would.
  absl::Status StartReadySyncs() {
    for (; early_.submitted < early_.ops.size() && early_.Ready(early_.submitted); ++early_.submitted) {
      PDIST_RETURN_IF_ERROR(OpenOptimizerTable());
      const size_t i = early_.ops[early_.submitted];
      for (int64_t id : early_.inputs[early_.submitted]) {
        optimizer_table_->values[static_cast<size_t>(id)] = sums_[static_cast<size_t>(id)];
        sum_handed_over_[static_cast<size_t>(id)] = true;
      }
      ex_.SubmitToStream(i, (*release_)[i], *optimizer_table_, state_);
      started_early_[i] = true;
      PDIST_RETURN_IF_ERROR(ex_.Release((*release_)[i], *optimizer_table_, state_));
    }
    return absl::OkStatus();
  }

  // After op i of a micro-batch's job: what the optimizer reads of its results joins the sums.
  // A result still coming from the communication stream (a gradient's reduce-scatter under
  // sharding.accumulate_shards) that nothing else in its micro-batch reads joins them when the
  // job ends, so that the backward goes on while the stream reduces it (one that is read there
  // may be freed by its last reader before the job ends: it is summed now).
  absl::Status Accumulate(size_t i, ValueTable& values) {
    for (const ir::Value* r : program_.block().ops()[i]->results()) {
      if (!ex_.job_plan_.accumulated.count(r->id())) continue;
      if (values.owed[static_cast<size_t>(r->id())].event != nullptr && ex_.job_plan_.freed_once_summed.count(r->id())) {
        from_stream_.push_back(r->id());
        continue;
      }
      PDIST_RETURN_IF_ERROR(AddToSum(r->id(), values));
    }
    return absl::OkStatus();
  }

  absl::Status AddToSum(int64_t id, ValueTable& values) {
    if (absl::Status s = ex_.Await(id, values, state_); !s.ok()) return ex_.Fail(s, state_);
    Tensor& share = values.values[static_cast<size_t>(id)];
    PDIST_RETURN_IF_ERROR(ex_.Accumulate(id, sums_[static_cast<size_t>(id)], share, state_));
    if (ex_.job_plan_.freed_once_summed.count(id)) {
      state_.live.Release(share);
      share = Tensor();
    }
    if (auto left = early_.shares_left.find(id); left != early_.shares_left.end() && --left->second == 0) {
      PDIST_RETURN_IF_ERROR(StartReadySyncs());
    }
    return absl::OkStatus();
  }

  absl::Status RunJob(const ir::PipelineJob& job) {
    const bool optimizer = job.kind == ir::JobKind::kOptimizer;
    PDIST_ASSIGN_OR_RETURN(ValueTable * values, TableFor(job));
    state_.job = job;
    state_.in_job = true;
    {
      ScopedSpan span(state_.timeline, {.name = job.ToString(), .category = ir::JobKindName(job.kind),
                                        .micro_batch = optimizer ? -1 : job.micro_batch,
                                        .chunk = optimizer ? -1 : job.chunk},
                      *state_.compute);
      std::vector<size_t> ops = ex_.job_plan_.OpsOf(job);
      if (optimizer && early_.submitted > 0) {  // without the syncs already on the stream
        std::erase_if(ops, [&](size_t i) { return started_early_[i]; });
      }
      const Executor::OpHook accumulate = [&](size_t i) {
        return optimizer ? absl::OkStatus() : Accumulate(i, *values);
      };
      PDIST_RETURN_IF_ERROR(ex_.RunOps(ops, *release_, *values, state_, accumulate));
      for (int64_t id : from_stream_) PDIST_RETURN_IF_ERROR(AddToSum(id, *values));
      from_stream_.clear();
    }
    if (!optimizer && --jobs_left_[static_cast<size_t>(job.micro_batch)] == 0) {
      PDIST_RETURN_IF_ERROR(CloseMicroBatch(job.micro_batch));
    }
    return absl::OkStatus();
  }

  // A micro-batch whose last job ran keeps nothing: its values are dropped, each once the
  // stream owing it has made it. Not waiting for the streams themselves: the last send of a
  // micro-batch may be held until the peer receives it (NCCL), and the peer may be waiting for
  // this rank's next job. The send holds its tensor (its Owed::slot) until it has run.
  absl::Status CloseMicroBatch(int64_t micro_batch) {
    std::unique_ptr<ValueTable>& table = tables_[static_cast<size_t>(micro_batch)];
    for (size_t id = 0; id < num_values_; ++id) {
      if (table->skip_release[id]) continue;  // its last reader, a stream op, holds it
      if (ex_.job_plan_.step_values.count(static_cast<int64_t>(id))) continue;  // the prologue's, for every micro-batch
      if (absl::Status s = ex_.Await(static_cast<int64_t>(id), *table, state_); !s.ok()) return ex_.Fail(s, state_);
      if (!program_.FindValue(static_cast<int64_t>(id))->is_argument()) state_.live.Release(table->values[id]);
    }
    table.reset();
    return absl::OkStatus();
  }

  absl::StatusOr<RunResult> Finish() {
    std::vector<ValueTable*> open;
    for (auto& t : tables_) {
      if (t != nullptr) open.push_back(t.get());
    }
    if (optimizer_table_ != nullptr) open.push_back(optimizer_table_.get());
    if (prologue_table_ != nullptr) open.push_back(prologue_table_.get());
    PDIST_RETURN_IF_ERROR(ex_.Drain(open, state_));
    if (prologue_table_ != nullptr) {
      for (int64_t id : ex_.job_plan_.step_values) state_.live.Release(prologue_table_->values[static_cast<size_t>(id)]);
    }
    std::vector<Tensor> merged = optimizer_table_ != nullptr ? optimizer_table_->values : std::vector<Tensor>(num_values_);
    for (int64_t id : ex_.job_plan_.accumulated) merged[static_cast<size_t>(id)] = sums_[static_cast<size_t>(id)];
    if (program_.loss() != nullptr && !merged[static_cast<size_t>(program_.loss()->id())].defined()) {
      return absl::FailedPreconditionError("pipelined step: no job computed the loss (is the optimizer job missing?)");
    }
    return ex_.Finish(merged, merged, state_, workspace_);
  }

  const Executor& ex_;
  const ir::Program& program_;
  const std::vector<ir::PipelineJob>& jobs_;
  const std::vector<Feeds>& micro_feeds_;
  Workspace& workspace_;
  const size_t num_values_;
  std::vector<int64_t> jobs_left_;  // per micro-batch: its jobs not yet run
  const std::vector<std::vector<int64_t>>* release_ = nullptr;
  // Declared before the state: when the step ends early, the state's streams are joined first,
  // while the tables its queued ops point into still exist.
  std::vector<std::unique_ptr<ValueTable>> tables_;  // per micro-batch, while it has jobs left
  std::unique_ptr<ValueTable> optimizer_table_;
  std::unique_ptr<ValueTable> prologue_table_;  // what the prologue made, while the step runs
  std::vector<Tensor> sums_;                          // by value id: summed over micro-batches
  RunState state_;
  EarlyGradientSync early_;
  std::vector<bool> sum_handed_over_;  // to an early gradient sync already
  std::vector<bool> started_early_;    // by op index
  std::vector<int64_t> from_stream_;   // this job's results to sum once the stream has made them
};

absl::StatusOr<RunResult> Executor::RunJobs(const std::vector<ir::PipelineJob>& jobs,
                                            const std::vector<Feeds>& micro_feeds, Workspace& workspace,
                                            TimelineRecorder* timeline) const {
  return PipelinedStep(*this, jobs, micro_feeds, workspace, timeline).Run();
}

}  // namespace pdist::exec
