// Executor: binds feeds and persistent tensors, runs kernels in program order, frees
// intermediates after their last use, applies state updates.
#include "executor/executor.h"

#include <chrono>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "ir/status.h"

namespace pdist::exec {

namespace {

// Live bytes of intermediate tensors, counted once per distinct buffer (views share one).
class LiveBytes {
 public:
  void Acquire(const Tensor& t) {
    if (!t.defined()) return;
    auto& [bytes, refs] = buffers_[t.buffer_id()];
    if (refs++ == 0) {
      bytes = t.num_bytes();
      live_ += bytes;
      peak_ = std::max(peak_, live_);
    }
  }
  void Release(const Tensor& t) {
    if (!t.defined()) return;
    auto it = buffers_.find(t.buffer_id());
    if (it == buffers_.end()) return;
    if (--it->second.second == 0) {
      live_ -= it->second.first;
      buffers_.erase(it);
    }
  }
  int64_t peak() const { return peak_; }

 private:
  std::unordered_map<const void*, std::pair<int64_t, int>> buffers_;
  int64_t live_ = 0;
  int64_t peak_ = 0;
};

absl::Status CheckBoundType(const ir::Value& v, const Tensor& t, const char* source) {
  if (t.type() != v.type()) {
    return absl::InvalidArgumentError(absl::StrCat(source, " '", v.name(), "' has type ", t.type().ToString(),
                                                   ", the program expects ", v.type().ToString()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Executor> Executor::Create(const ir::Program& program, ExecutorOptions options) {
  const KernelRegistry& kernels = KernelRegistry::Global();
  std::vector<const KernelFn*> fns;
  for (const auto& op : program.block().ops()) {
    const KernelFn* fn = kernels.Find(options.device, op->type());
    if (fn == nullptr) {
      return absl::UnimplementedError(absl::StrCat("no ", options.device == Device::kCPU ? "CPU" : "CUDA",
                                                   " kernel for op '", op->type(), "'"));
    }
    fns.push_back(fn);
  }
  MemoryPlan plan = PlanMemory(program, options.fetch_ids);
  return Executor(program, std::move(options), std::move(plan), std::move(fns));
}

absl::StatusOr<RunResult> Executor::Run(const Feeds& feeds, Workspace& workspace) const {
  const ir::Program& program = *program_;
  std::vector<Tensor> values(static_cast<size_t>(program.num_values()));
  for (const ir::Value* arg : program.block().arguments()) {
    if (arg->role() == ir::ValueRole::kDataInput) {
      auto it = feeds.find(arg->name());
      if (it == feeds.end()) return absl::InvalidArgumentError(absl::StrCat("no feed for data input '", arg->name(), "'"));
      PDIST_RETURN_IF_ERROR(CheckBoundType(*arg, it->second, "feed"));
      values[static_cast<size_t>(arg->id())] = it->second;
    } else {
      auto it = workspace.find(arg->name());
      if (it == workspace.end()) {
        return absl::FailedPreconditionError(
            absl::StrCat("workspace has no tensor for '", arg->name(), "' (call InitializeWorkspace first)"));
      }
      PDIST_RETURN_IF_ERROR(CheckBoundType(*arg, it->second, "workspace tensor"));
      values[static_cast<size_t>(arg->id())] = it->second;
    }
  }

  RunResult result;
  LiveBytes live;
  const auto& ops = program.block().ops();
  std::vector<Tensor> outputs;
  for (size_t i = 0; i < ops.size(); ++i) {
    const ir::Operation& op = *ops[i];
    std::vector<const Tensor*> inputs;
    inputs.reserve(op.num_operands());
    for (const ir::Value* v : op.operands()) {
      inputs.push_back(v == nullptr ? nullptr : &values[static_cast<size_t>(v->id())]);
    }
    outputs.assign(op.num_results(), Tensor());
    KernelContext ctx(op, std::move(inputs), &outputs);
    ctx.set_comm_groups(options_.comm_groups.get());
    const auto start = options_.profile ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
    absl::Status status = (*kernels_[i])(ctx);
    if (options_.profile) {
      result.op_seconds[op.type()] += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    if (!status.ok()) return Annotate(status, absl::StrCat("op #", i, " ", op.Describe()));
    for (size_t r = 0; r < op.num_results(); ++r) {
      const ir::Value* result = op.result(r);
      if (!outputs[r].defined() || outputs[r].type() != result->type()) {
        return absl::InternalError(absl::StrCat("kernel of op #", i, " ", op.Describe(), " produced ",
                                                outputs[r].defined() ? outputs[r].type().ToString() : "nothing",
                                                " for result ", r, ", expected ", result->type().ToString()));
      }
      live.Acquire(outputs[r]);
      values[static_cast<size_t>(result->id())] = std::move(outputs[r]);
    }
    for (int64_t id : plan_.release_after[i]) {
      live.Release(values[static_cast<size_t>(id)]);
      values[static_cast<size_t>(id)] = Tensor();
    }
  }

  result.peak_bytes = live.peak();
  if (program.loss() != nullptr) {
    result.loss = values[static_cast<size_t>(program.loss()->id())].At(0);
    result.has_loss = true;
  }
  for (int64_t id : options_.fetch_ids) result.fetched[id] = values[static_cast<size_t>(id)];
  for (const ir::StateUpdate& u : program.updates()) {
    workspace[u.state->name()] = values[static_cast<size_t>(u.new_value->id())];
  }
  return result;
}

}  // namespace pdist::exec
