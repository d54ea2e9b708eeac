// Executor::RunJobs: a pipelined step — per-micro-batch tables, sums over micro-batches, the
// optimizer once, spans for the timeline.
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
  for (const ir::PipelineJob& job : jobs) {
    const bool optimizer = job.kind == ir::JobKind::kOptimizer;
    std::unique_ptr<ValueTable>& table = optimizer ? optimizer_table : tables[static_cast<size_t>(job.micro_batch)];
    if (table == nullptr) {
      table = std::make_unique<ValueTable>(num_values);
      PDIST_RETURN_IF_ERROR(BindArguments(micro_feeds[optimizer ? 0 : static_cast<size_t>(job.micro_batch)], workspace, *table));
      if (optimizer) {
        for (int64_t id : job_plan_.accumulated) table->values[static_cast<size_t>(id)] = sums[static_cast<size_t>(id)];
      }
    }
    ValueTable& values = *table;
    auto accumulate = [&](size_t i) -> absl::Status {
      if (optimizer) return absl::OkStatus();
      for (const ir::Value* r : program.block().ops()[i]->results()) {
        if (!job_plan_.accumulated.count(r->id())) continue;
        PDIST_RETURN_IF_ERROR(Await(r->id(), values, state));
        PDIST_RETURN_IF_ERROR(AddInto(sums[static_cast<size_t>(r->id())], values.values[static_cast<size_t>(r->id())], state.live));
      }
      return absl::OkStatus();
    };
    state.job = job;
    state.in_job = true;
    {
      ScopedSpan span(timeline, {.name = job.ToString(), .category = ir::JobKindName(job.kind),
                                 .micro_batch = optimizer ? -1 : job.micro_batch, .chunk = optimizer ? -1 : job.chunk});
      PDIST_RETURN_IF_ERROR(RunOps(job_plan_.OpsOf(job), release, values, state, accumulate));
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
