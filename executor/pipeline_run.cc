// Executor::RunJobs: a pipelined step — per-micro-batch tables, sums over micro-batches, the
// optimizer once, spans for the timeline.
#include <algorithm>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "executor/dtype_dispatch.h"
#include "executor/executor.h"
#include "executor/timeline.h"
#include "ir/status.h"

namespace pdist::exec {
namespace {

// sum += x, into a fresh tensor: x may be a view of a tensor still in use.
absl::Status AddInto(Tensor& sum, const Tensor& x, LiveBytes& live) {
  if (!sum.defined()) {
    sum = x;
    live.Acquire(sum);
    return absl::OkStatus();
  }
  Tensor out = Tensor::Empty(x.type());
  const int64_t n = x.num_elements();
  PDIST_DISPATCH_FLOAT(x.dtype(), T, {
    const T* a = sum.data<T>();
    const T* b = x.data<T>();
    T* o = out.data<T>();
    for (int64_t i = 0; i < n; ++i) o[i] = a[i] + b[i];
  });
  live.Acquire(out);
  live.Release(sum);
  sum = std::move(out);
  return absl::OkStatus();
}

bool SplitsBackward(const std::vector<ir::PipelineJob>& jobs) {
  for (const ir::PipelineJob& job : jobs) {
    if (job.kind == ir::JobKind::kBackwardInput || job.kind == ir::JobKind::kBackwardWeight) return true;
  }
  return false;
}

// The gradient all-reduces of the optimizer job that may start before it: each as soon as the
// last micro-batch has added its share to every gradient it reduces, so that it overlaps the
// rest of that micro-batch's backward (as Megatron-LM overlaps the last micro-batch's), not the
// optimizer job's start. Only all-reduces of gradients qualify: every rank of their group holds
// the same stage and runs the same jobs, so all of them move the same collectives ahead of the
// same stream ops, and each reaches them once its own backward has; a collective that a rank of
// another stage waits on (the loss's send) stays in O, where starting it early could deadlock.
// They go on the stream in program order.
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
    const ir::OpRole role = v->producer()->role();
    return role == ir::OpRole::kBackward || role == ir::OpRole::kBackwardWeight;
  };
  for (size_t i : plan.OpsOf({.kind = ir::JobKind::kOptimizer})) {
    if (!on_comm_stream[i]) continue;
    const ir::Operation& op = *ops[i];
    const bool gradient_sync = (op.type() == "c_allreduce" || op.type() == "c_allreduce_coalesced") &&
                               op.num_operands() > 0 &&
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

absl::StatusOr<RunResult> Executor::RunJobs(const std::vector<ir::PipelineJob>& jobs,
                                            const std::vector<Feeds>& micro_feeds, Workspace& workspace,
                                            TimelineRecorder* timeline) const {
  const ir::Program& program = *program_;
  const size_t num_values = static_cast<size_t>(program.num_values());
  const int64_t micro_batches = static_cast<int64_t>(micro_feeds.size());
  if (micro_batches < 1) return absl::InvalidArgumentError("pipelined step: no micro-batch feeds");
  PDIST_RETURN_IF_ERROR(job_plan_.unsummable);
  std::vector<int64_t> jobs_left(static_cast<size_t>(micro_batches), 0);
  for (const ir::PipelineJob& job : jobs) {
    if (job.kind == ir::JobKind::kOptimizer) continue;
    if (job.micro_batch < 0 || job.micro_batch >= micro_batches || job.chunk < 0 || job.chunk >= job_plan_.chunks) {
      return absl::InvalidArgumentError(absl::StrCat("pipelined step: job ", job.ToString(), " is outside ",
                                                     micro_batches, " micro-batches × ", job_plan_.chunks, " chunks"));
    }
    ++jobs_left[static_cast<size_t>(job.micro_batch)];
  }
  const auto& release = SplitsBackward(jobs) ? job_plan_.release_split : job_plan_.release_whole;

  // Declared before the state: on an early return the state's stream is joined first, while the
  // tables its queued ops point into still exist.
  std::vector<std::unique_ptr<ValueTable>> tables(static_cast<size_t>(micro_batches));
  std::unique_ptr<ValueTable> optimizer_table;
  std::vector<Tensor> sums(num_values);
  RunState state;
  state.timeline = timeline;
  EarlyGradientSync early = options_.overlap_communication
                                ? PlanEarlyGradientSync(program, job_plan_, on_comm_stream_, jobs)
                                : EarlyGradientSync{};
  std::vector<bool> sum_handed_over(num_values, false);  // to an early gradient sync already
  std::vector<bool> started_early(program.block().ops().size(), false);  // by op index
  auto open_optimizer_table = [&]() -> absl::Status {
    if (optimizer_table != nullptr) return absl::OkStatus();
    optimizer_table = std::make_unique<ValueTable>(num_values);
    return BindArguments(micro_feeds[0], workspace, *optimizer_table);
  };
  // Puts the gradient syncs whose sums are complete on the stream, as the optimizer job would,
  // and frees their inputs after them as it would.
  auto start_ready_syncs = [&]() -> absl::Status {
    for (; early.submitted < early.ops.size() && early.Ready(early.submitted); ++early.submitted) {
      PDIST_RETURN_IF_ERROR(open_optimizer_table());
      const size_t i = early.ops[early.submitted];
      for (int64_t id : early.inputs[early.submitted]) {
        optimizer_table->values[static_cast<size_t>(id)] = sums[static_cast<size_t>(id)];
        sum_handed_over[static_cast<size_t>(id)] = true;
      }
      SubmitToStream(i, release[i], *optimizer_table, state);
      started_early[i] = true;
      PDIST_RETURN_IF_ERROR(Release(release[i], *optimizer_table, state));
    }
    return absl::OkStatus();
  };
  for (const ir::PipelineJob& job : jobs) {
    const bool optimizer = job.kind == ir::JobKind::kOptimizer;
    std::unique_ptr<ValueTable>& table = optimizer ? optimizer_table : tables[static_cast<size_t>(job.micro_batch)];
    if (optimizer) {
      PDIST_RETURN_IF_ERROR(open_optimizer_table());
      for (int64_t id : job_plan_.accumulated) {
        if (!sum_handed_over[static_cast<size_t>(id)]) table->values[static_cast<size_t>(id)] = sums[static_cast<size_t>(id)];
      }
    } else if (table == nullptr) {
      table = std::make_unique<ValueTable>(num_values);
      PDIST_RETURN_IF_ERROR(BindArguments(micro_feeds[static_cast<size_t>(job.micro_batch)], workspace, *table));
    }
    ValueTable& values = *table;
    auto accumulate = [&](size_t i) -> absl::Status {
      if (optimizer) return absl::OkStatus();
      for (const ir::Value* r : program.block().ops()[i]->results()) {
        if (!job_plan_.accumulated.count(r->id())) continue;
        PDIST_RETURN_IF_ERROR(Await(r->id(), values, state));
        PDIST_RETURN_IF_ERROR(AddInto(sums[static_cast<size_t>(r->id())], values.values[static_cast<size_t>(r->id())], state.live));
        if (auto left = early.shares_left.find(r->id()); left != early.shares_left.end() && --left->second == 0) {
          PDIST_RETURN_IF_ERROR(start_ready_syncs());
        }
      }
      return absl::OkStatus();
    };
    state.job = job;
    state.in_job = true;
    {
      ScopedSpan span(timeline, {.name = job.ToString(), .category = ir::JobKindName(job.kind),
                                 .micro_batch = optimizer ? -1 : job.micro_batch, .chunk = optimizer ? -1 : job.chunk});
      const std::vector<size_t>& ops = job_plan_.OpsOf(job);
      if (!optimizer || early.submitted == 0) {
        PDIST_RETURN_IF_ERROR(RunOps(ops, release, values, state, accumulate));
      } else {  // without the syncs already on the stream
        std::vector<size_t> rest;
        std::copy_if(ops.begin(), ops.end(), std::back_inserter(rest), [&](size_t i) { return !started_early[i]; });
        PDIST_RETURN_IF_ERROR(RunOps(rest, release, values, state, accumulate));
      }
    }
    // A micro-batch whose last job ran keeps nothing: once the stream has run what reads its
    // tensors (a send of the last gradient), they are freed.
    if (!optimizer && --jobs_left[static_cast<size_t>(job.micro_batch)] == 0) {
      if (state.stream != nullptr) {
        if (absl::Status s = state.stream->Synchronize(); !s.ok()) return Fail(s, state);
      }
      for (size_t id = 0; id < num_values; ++id) {
        PDIST_RETURN_IF_ERROR(Await(static_cast<int64_t>(id), values, state));
        if (!program.FindValue(static_cast<int64_t>(id))->is_argument()) state.live.Release(values.values[id]);
      }
      table.reset();
    }
  }
  std::vector<ValueTable*> open;
  for (auto& t : tables) {
    if (t != nullptr) open.push_back(t.get());
  }
  if (optimizer_table != nullptr) open.push_back(optimizer_table.get());
  PDIST_RETURN_IF_ERROR(Drain(open, state));

  std::vector<Tensor> merged = optimizer_table != nullptr ? optimizer_table->values : std::vector<Tensor>(num_values);
  for (int64_t id : job_plan_.accumulated) merged[static_cast<size_t>(id)] = sums[static_cast<size_t>(id)];
  if (program.loss() != nullptr && !merged[static_cast<size_t>(program.loss()->id())].defined()) {
    return absl::FailedPreconditionError("pipelined step: no job computed the loss (is the optimizer job missing?)");
  }
  return Finish(merged, merged, state, workspace);
}

}  // namespace pdist::exec
