// Pipeline schedules per stage, and the simulator that times them.
#include "passes/pipeline_schedule.h"

#include <algorithm>
#include <array>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/status.h"
#include "passes/schedules/schedule_def.h"

namespace pdist::passes {
namespace {

using ir::JobKind;
using ir::PipelineJob;

absl::Status CheckCounts(const ScheduleShape& shape) {
  if (shape.stages < 1) return absl::InvalidArgumentError(absl::StrCat("stages must be >= 1, got ", shape.stages));
  if (shape.micro_batches < 1) {
    return absl::InvalidArgumentError(absl::StrCat("micro_batches must be >= 1, got ", shape.micro_batches));
  }
  if (shape.chunks < 1) return absl::InvalidArgumentError(absl::StrCat("chunks must be >= 1, got ", shape.chunks));
  return absl::OkStatus();
}

// Finish times of every (micro-batch, virtual stage) job while a simulation runs; -1: not yet.
class Timeline {
 public:
  // costs: one per virtual stage k = chunk·p + stage.
  Timeline(const ScheduleShape& shape, std::vector<JobCosts> costs)
      : p_(shape.stages), virtual_stages_(shape.stages * shape.chunks), costs_(std::move(costs)),
        forward_(shape.micro_batches * virtual_stages_, -1), backward_(forward_) {}

  // When `job` of `stage` may start as far as other jobs go; nullopt, with the job it waits for
  // in *blocker, while one of its dependencies has not run.
  std::optional<double> Ready(int64_t stage, const PipelineJob& job, std::string* blocker) const {
    const int64_t k = job.chunk * p_ + stage;
    double ready = 0;
    auto need = [&](const std::vector<double>& ends, JobKind kind, int64_t at) {
      const int64_t at_stage = at % p_;
      const double end = ends[job.micro_batch * virtual_stages_ + at];
      if (end < 0) {
        *blocker = absl::StrCat(PipelineJob{kind, job.micro_batch, at / p_}.ToString(), " on stage ", at_stage);
        return false;
      }
      ready = std::max(ready, end + (at_stage == stage ? 0 : costs_[k].p2p));
      return true;
    };
    switch (job.kind) {
      case JobKind::kForward:
        if (k > 0 && !need(forward_, JobKind::kForward, k - 1)) return std::nullopt;
        break;
      case JobKind::kBackward:
      case JobKind::kBackwardInput:
        if (!need(forward_, JobKind::kForward, k)) return std::nullopt;
        if (k + 1 < virtual_stages_ && !need(backward_, job.kind, k + 1)) return std::nullopt;
        break;
      case JobKind::kBackwardWeight:
        if (!need(backward_, JobKind::kBackwardInput, k)) return std::nullopt;
        break;
      case JobKind::kOptimizer:
        break;
    }
    return ready;
  }

  double Cost(int64_t stage, const PipelineJob& job) const {
    const JobCosts& c = costs_[job.chunk * p_ + stage];
    switch (job.kind) {
      case JobKind::kForward: return c.forward;
      case JobKind::kBackward: return c.backward;
      case JobKind::kBackwardInput: return c.backward_input;
      case JobKind::kBackwardWeight: return c.backward_weight;
      case JobKind::kOptimizer: return c.optimizer;
    }
    return 0;
  }

  void Finish(int64_t stage, const PipelineJob& job, double end) {
    const int64_t index = job.micro_batch * virtual_stages_ + job.chunk * p_ + stage;
    if (job.kind == JobKind::kForward) forward_[index] = end;
    if (job.kind == JobKind::kBackward || job.kind == JobKind::kBackwardInput) backward_[index] = end;
  }

 private:
  int64_t p_;
  int64_t virtual_stages_;
  std::vector<JobCosts> costs_;
  std::vector<double> forward_, backward_;  // B or B-input; nothing waits for a W
};

// One F and one B, or one F, one B-input and one W, per (micro-batch, chunk); at most one O.
absl::Status CheckJobList(const std::vector<PipelineJob>& jobs, const ScheduleShape& shape, int64_t stage) {
  const int64_t m = shape.micro_batches, v = shape.chunks;
  std::vector<std::array<int64_t, 4>> count(m * v, std::array<int64_t, 4>{});  // by kind F, B, B-input, W
  int64_t optimizers = 0;
  for (const PipelineJob& job : jobs) {
    if (job.kind == JobKind::kOptimizer) {
      if (++optimizers > 1) return absl::InvalidArgumentError(absl::StrCat("stage ", stage, " has more than one O"));
      continue;
    }
    if (job.micro_batch < 0 || job.micro_batch >= m || job.chunk < 0 || job.chunk >= v) {
      return absl::InvalidArgumentError(absl::StrCat("stage ", stage, ": job ", job.ToString(),
                                                     " is outside micro_batches=", m, ", chunks=", v));
    }
    ++count[job.micro_batch * v + job.chunk][static_cast<int>(job.kind)];
  }
  for (int64_t i = 0; i < m * v; ++i) {
    const auto& [f, b, bi, w] = count[i];
    if (f == 1 && ((b == 1 && bi == 0 && w == 0) || (b == 0 && bi == 1 && w == 1))) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        "stage ", stage, ", micro-batch ", i / v, ", chunk ", i % v,
        ": want one F and one B (or one B-input and one W), got ", f, " F, ", b, " B, ", bi, " B-input, ", w, " W"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ScheduleMode> ParseScheduleMode(std::string_view name) {
  std::vector<std::string> valid;
  for (const ScheduleDef& def : ScheduleDefs()) {
    if (name == def.name) return def.mode;
    valid.push_back(def.name);
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown pipeline schedule \"", std::string(name),
                                                 "\"; valid: ", absl::StrJoin(valid, ", ")));
}

const char* ScheduleModeName(ScheduleMode mode) { return ScheduleDefOf(mode).name; }

absl::Status CheckScheduleShape(ScheduleMode mode, const ScheduleShape& shape) {
  PDIST_RETURN_IF_ERROR(CheckCounts(shape));
  const ScheduleDef& def = ScheduleDefOf(mode);
  if (!def.interleaves_chunks && shape.chunks != 1) {
    std::vector<std::string> interleaved;
    for (const ScheduleDef& d : ScheduleDefs()) {
      if (d.interleaves_chunks) interleaved.push_back(d.name);
    }
    return absl::InvalidArgumentError(absl::StrCat(def.name, " runs one chunk per stage, got chunks=", shape.chunks,
                                                   " (pipeline.vpp_degree; only ", absl::StrJoin(interleaved, ", "),
                                                   " interleaves)"));
  }
  if (def.interleaves_chunks && shape.chunks < 2) {
    return absl::InvalidArgumentError(absl::StrCat(def.name, " needs chunks >= 2, got chunks=", shape.chunks));
  }
  return def.check_shape ? def.check_shape(shape) : absl::OkStatus();
}

absl::StatusOr<std::vector<PipelineJob>> BuildSchedule(ScheduleMode mode, const ScheduleShape& shape, int64_t stage) {
  PDIST_RETURN_IF_ERROR(CheckScheduleShape(mode, shape));
  if (stage < 0 || stage >= shape.stages) {
    return absl::InvalidArgumentError(absl::StrCat("stage ", stage, " is outside [0, ", shape.stages, ")"));
  }
  std::vector<PipelineJob> jobs = ScheduleDefOf(mode).build(shape, stage);
  jobs.push_back({JobKind::kOptimizer, 0, 0});
  return jobs;
}

std::string JobsToString(const std::vector<PipelineJob>& jobs) {
  return absl::StrJoin(jobs, " ", [](std::string* out, const PipelineJob& job) { out->append(job.ToString()); });
}

absl::StatusOr<SimulatedSchedule> SimulateSchedule(const std::vector<std::vector<PipelineJob>>& per_stage,
                                                   const ScheduleShape& shape, const JobCosts& costs) {
  PDIST_RETURN_IF_ERROR(CheckCounts(shape));
  return SimulateSchedule(per_stage, shape, std::vector<JobCosts>(shape.stages * shape.chunks, costs));
}

absl::StatusOr<SimulatedSchedule> SimulateSchedule(const std::vector<std::vector<PipelineJob>>& per_stage,
                                                   const ScheduleShape& shape,
                                                   const std::vector<JobCosts>& virtual_stage_costs) {
  PDIST_RETURN_IF_ERROR(CheckCounts(shape));
  const int64_t p = shape.stages;
  if (static_cast<int64_t>(per_stage.size()) != p) {
    return absl::InvalidArgumentError(absl::StrCat("got job lists for ", per_stage.size(), " stages, want ", p));
  }
  if (static_cast<int64_t>(virtual_stage_costs.size()) != p * shape.chunks) {
    return absl::InvalidArgumentError(absl::StrCat("got job costs for ", virtual_stage_costs.size(),
                                                   " virtual stages, want stages × chunks = ", p * shape.chunks));
  }
  for (const JobCosts& costs : virtual_stage_costs) {
    for (double cost : {costs.forward, costs.backward, costs.backward_input, costs.backward_weight, costs.optimizer,
                        costs.p2p, costs.activation_bytes}) {
      if (cost < 0) return absl::InvalidArgumentError(absl::StrCat("job costs must be >= 0, got ", cost));
    }
  }
  for (int64_t s = 0; s < p; ++s) {
    PDIST_RETURN_IF_ERROR(CheckJobList(per_stage[s], shape, s));
  }

  // Each pass runs, on every stage, the jobs whose dependencies have finished; a job's times
  // depend only on finished jobs, so the order of the passes does not change them.
  Timeline timeline(shape, virtual_stage_costs);
  SimulatedSchedule result;
  result.stages.resize(p);
  std::vector<double> clock(p, 0);
  std::string blocker;
  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t s = 0; s < p; ++s) {
      std::vector<SimulatedJob>& done = result.stages[s];
      while (done.size() < per_stage[s].size()) {
        const PipelineJob& job = per_stage[s][done.size()];
        const std::optional<double> ready = timeline.Ready(s, job, &blocker);
        if (!ready) break;
        const double start = std::max(clock[s], *ready);
        clock[s] = start + timeline.Cost(s, job);
        done.push_back({job, start, clock[s]});
        timeline.Finish(s, job, clock[s]);
        progress = true;
      }
    }
  }

  std::vector<std::string> stuck;
  for (int64_t s = 0; s < p; ++s) {
    const size_t at = result.stages[s].size();
    if (at == per_stage[s].size()) continue;
    timeline.Ready(s, per_stage[s][at], &blocker);
    stuck.push_back(absl::StrCat("stage ", s, " stuck at job ", at, " (", per_stage[s][at].ToString(),
                                 ") waiting for ", blocker));
  }
  if (!stuck.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("pipeline schedule deadlocks: ", absl::StrJoin(stuck, "; ")));
  }

  result.makespan = *std::max_element(clock.begin(), clock.end());
  for (int64_t s = 0; s < p; ++s) {
    double busy = 0, alive_bytes = 0, peak_bytes = 0;
    int64_t alive = 0, peak = 0, at_first_backward = 0, at_later_backwards = 0;
    for (const SimulatedJob& sim : result.stages[s]) {
      busy += sim.end - sim.start;
      const bool keeps = sim.job.kind == JobKind::kForward || sim.job.kind == JobKind::kBackward ||
                         sim.job.kind == JobKind::kBackwardWeight;
      const double bytes =
          keeps ? virtual_stage_costs[static_cast<size_t>(sim.job.chunk * p + s)].activation_bytes : 0;
      // Jobs of a stage never overlap, so counting in list order is counting in time.
      if (sim.job.kind == JobKind::kForward) {
        peak = std::max(peak, ++alive);
        peak_bytes = std::max(peak_bytes, alive_bytes += bytes);
      }
      if (sim.job.kind == JobKind::kBackward || sim.job.kind == JobKind::kBackwardInput) {
        if (at_first_backward == 0) {
          at_first_backward = alive;
        } else {
          at_later_backwards = std::max(at_later_backwards, alive);
        }
      }
      if (sim.job.kind == JobKind::kBackward || sim.job.kind == JobKind::kBackwardWeight) {
        --alive;
        alive_bytes -= bytes;
      }
    }
    result.bubble_fraction.push_back(result.makespan > 0 ? (result.makespan - busy) / result.makespan : 0);
    result.peak_in_flight.push_back(peak);
    result.peak_alive_bytes.push_back(peak_bytes);
    result.alive_at_first_backward.push_back(at_first_backward);
    result.alive_at_later_backwards.push_back(at_later_backwards);
  }
  return result;
}

}  // namespace pdist::passes
