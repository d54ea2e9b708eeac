// Executor: binds feeds and persistent tensors, runs kernels in program order, frees
// intermediates after their last use, applies state updates.
#include "executor/executor.h"

#include <algorithm>
#include <chrono>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "executor/comm/comm_groups.h"
#include "executor/comm_stream.h"
#include "ir/op_def.h"
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
  std::vector<bool> on_comm_stream;
  for (const auto& op : program.block().ops()) {
    const ir::OpDef* def = ir::OpRegistry::Global().Find(op->type());
    on_comm_stream.push_back(options.overlap_communication && options.comm_groups != nullptr && def != nullptr &&
                             def->communicates);
  }
  return Executor(program, std::move(options), std::move(plan), std::move(fns), std::move(on_comm_stream));
}

absl::Status Executor::RunKernel(size_t index, const ir::Operation& op, std::vector<const Tensor*> inputs,
                                 std::vector<Tensor>& outputs, std::map<std::string, double>* op_seconds) const {
  KernelContext ctx(op, std::move(inputs), &outputs);
  ctx.set_comm_groups(options_.comm_groups.get());
  const bool timed = options_.profile && op_seconds != nullptr;
  const auto start = timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
  absl::Status status = (*kernels_[index])(ctx);
  if (timed) (*op_seconds)[op.type()] += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!status.ok()) return Annotate(status, absl::StrCat("op #", index, " ", op.Describe()));
  for (size_t r = 0; r < op.num_results(); ++r) {
    const ir::Value* result = op.result(r);
    if (!outputs[r].defined() || outputs[r].type() != result->type()) {
      return absl::InternalError(absl::StrCat("kernel of op #", index, " ", op.Describe(), " produced ",
                                              outputs[r].defined() ? outputs[r].type().ToString() : "nothing",
                                              " for result ", r, ", expected ", result->type().ToString()));
    }
  }
  return absl::OkStatus();
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
  // Values produced on the communication stream and not yet waited for: the main thread reads
  // or frees such a value only after its event has fired.
  std::vector<std::shared_ptr<StreamEvent>> pending(values.size());
  std::vector<bool> skip_release(values.size(), false);
  std::unique_ptr<CommStream> stream;
  auto await = [&](int64_t id) -> absl::Status {
    std::shared_ptr<StreamEvent>& event = pending[static_cast<size_t>(id)];
    if (event == nullptr) return absl::OkStatus();
    PDIST_RETURN_IF_ERROR(event->Wait());
    event = nullptr;
    live.Acquire(values[static_cast<size_t>(id)]);
    return absl::OkStatus();
  };
  // On failure, stop the peers too (they may wait for this rank in a collective) before the
  // stream's thread is joined.
  auto fail = [&](absl::Status status) {
    if (stream != nullptr && options_.comm_groups != nullptr) options_.comm_groups->world().Abort();
    return status;
  };

  for (size_t i = 0; i < ops.size(); ++i) {
    const ir::Operation& op = *ops[i];
    if (on_comm_stream_[i]) {
      if (stream == nullptr) stream = std::make_unique<CommStream>();
      // Inputs computed here are captured now; inputs from earlier stream ops are read when
      // this op runs — the stream is in order, so they are written by then.
      std::vector<Tensor> captured(op.num_operands());
      std::vector<size_t> from_stream;
      std::vector<int64_t> dropped_by_stream;  // stream-made inputs whose last use is this op
      for (size_t k = 0; k < op.num_operands(); ++k) {
        const ir::Value* v = op.operand(k);
        if (v == nullptr) continue;
        if (pending[static_cast<size_t>(v->id())] != nullptr) {
          from_stream.push_back(k);
          const auto& last = plan_.release_after[i];
          if (std::find(last.begin(), last.end(), v->id()) != last.end()) dropped_by_stream.push_back(v->id());
        } else {
          captured[k] = values[static_cast<size_t>(v->id())];
        }
      }
      for (int64_t id : dropped_by_stream) skip_release[static_cast<size_t>(id)] = true;
      auto event = stream->Submit([this, &op, &values, i, captured = std::move(captured), from_stream,
                                   dropped_by_stream]() mutable {
        for (size_t k : from_stream) captured[k] = values[static_cast<size_t>(op.operand(k)->id())];
        for (int64_t id : dropped_by_stream) values[static_cast<size_t>(id)] = Tensor();
        std::vector<const Tensor*> inputs;
        for (size_t k = 0; k < captured.size(); ++k) inputs.push_back(op.operand(k) == nullptr ? nullptr : &captured[k]);
        std::vector<Tensor> outputs(op.num_results());
        PDIST_RETURN_IF_ERROR(RunKernel(i, op, std::move(inputs), outputs, nullptr));
        for (size_t r = 0; r < op.num_results(); ++r) values[static_cast<size_t>(op.result(r)->id())] = std::move(outputs[r]);
        return absl::OkStatus();
      });
      for (const ir::Value* r : op.results()) pending[static_cast<size_t>(r->id())] = event;
    } else {
      std::vector<const Tensor*> inputs;
      inputs.reserve(op.num_operands());
      for (const ir::Value* v : op.operands()) {
        if (v != nullptr) {
          if (absl::Status s = await(v->id()); !s.ok()) return fail(s);
        }
        inputs.push_back(v == nullptr ? nullptr : &values[static_cast<size_t>(v->id())]);
      }
      std::vector<Tensor> outputs(op.num_results());
      if (absl::Status s = RunKernel(i, op, std::move(inputs), outputs, &result.op_seconds); !s.ok()) return fail(s);
      for (size_t r = 0; r < op.num_results(); ++r) {
        live.Acquire(outputs[r]);
        values[static_cast<size_t>(op.result(r)->id())] = std::move(outputs[r]);
      }
    }
    for (int64_t id : plan_.release_after[i]) {
      // An input of a stream op was captured by it; a value the stream made and still reads is
      // dropped by the stream; any other value the stream owes is waited for before it is dropped.
      if (skip_release[static_cast<size_t>(id)]) continue;
      if (absl::Status s = await(id); !s.ok()) return fail(s);
      live.Release(values[static_cast<size_t>(id)]);
      values[static_cast<size_t>(id)] = Tensor();
    }
  }
  if (stream != nullptr) {
    if (absl::Status s = stream->Synchronize(); !s.ok()) return fail(s);
    for (size_t id = 0; id < pending.size(); ++id) PDIST_RETURN_IF_ERROR(await(static_cast<int64_t>(id)));
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
