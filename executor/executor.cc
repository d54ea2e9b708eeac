// Executor: binds feeds and persistent tensors, runs kernels in program order, frees
// intermediates after their last use, applies state updates.
#include "executor/executor.h"

#include <algorithm>
#include <chrono>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "executor/comm/comm_groups.h"
#include "executor/run_state.h"
#include "executor/say_once.h"
#include "executor/timeline.h"
#include "ir/builder.h"
#include "ir/op_def.h"
#include "ir/status.h"

namespace pdist::exec {

namespace {

absl::Status CheckBound(const ir::Value& v, const Tensor& t, const Device& device, const char* source) {
  if (t.type() != v.type()) {
    return absl::InvalidArgumentError(absl::StrCat(source, " '", v.name(), "' has type ", t.type().ToString(),
                                                   ", the program expects ", v.type().ToString()));
  }
  if (t.device() != device) {
    return absl::InvalidArgumentError(absl::StrCat(source, " '", v.name(), "' is on ", t.device().ToString(),
                                                   ", the program runs on ", device.ToString(),
                                                   ": move it there first (ToDevice, executor/backend.h)"));
  }
  return absl::OkStatus();
}

}  // namespace

namespace {
bool IsGradient(const ir::Value& v) { return v.role() == ir::ValueRole::kGradient; }
}  // namespace

void LiveBytes::Add(int64_t bytes, bool gradient) {
  live_ += bytes;
  if (gradient) gradient_live_ += bytes;
  peak_ = std::max(peak_, live_);
  gradient_peak_ = std::max(gradient_peak_, gradient_live_);
  activation_peak_ = std::max(activation_peak_, live_ - gradient_live_);
}

void LiveBytes::Subtract(int64_t bytes, bool gradient) {
  live_ -= bytes;
  if (gradient) gradient_live_ -= bytes;
}

void LiveBytes::Acquire(const Tensor& t, bool gradient) {
  if (!t.defined()) return;
  Buffer& b = buffers_[t.buffer_id()];
  if (b.refs++ == 0) {
    b.bytes = t.num_bytes();
    b.gradient = gradient;
    Add(b.bytes, gradient);
  }
}

void LiveBytes::Release(const Tensor& t) {
  if (!t.defined()) return;
  auto it = buffers_.find(t.buffer_id());
  if (it == buffers_.end()) return;
  if (--it->second.refs == 0) {
    Subtract(it->second.bytes, it->second.gradient);
    buffers_.erase(it);
  }
}

void LiveBytes::Reserve(const void* key, int64_t bytes, bool gradient) {
  Unreserve(key);
  reserved_[key] = {bytes, 1, gradient};
  Add(bytes, gradient);
}

void LiveBytes::Unreserve(const void* key) {
  auto it = reserved_.find(key);
  if (it == reserved_.end()) return;
  Subtract(it->second.bytes, it->second.gradient);
  reserved_.erase(it);
}

absl::StatusOr<Executor> Executor::Create(const ir::Program& program, ExecutorOptions options) {
  PDIST_ASSIGN_OR_RETURN(Backend * backend, BackendFor(options.device));
  const KernelRegistry& kernels = KernelRegistry::Global();
  std::vector<const KernelFn*> fns;
  for (const auto& op : program.block().ops()) {
    const KernelFn* fn = kernels.Find(options.device.type, op->type());
    if (fn == nullptr) {
      return absl::UnimplementedError(
          absl::StrCat("no ", DeviceTypeName(options.device.type), " kernel for op '", op->type(), "'"));
    }
    fns.push_back(fn);
  }
  MemoryPlan plan = PlanMemory(program, options.fetch_ids);
  std::vector<bool> on_comm_stream;
  std::vector<std::vector<bool>> reads_operand;
  for (const auto& op : program.block().ops()) {
    const ir::OpDef* def = ir::OpRegistry::Global().Find(op->type());
    on_comm_stream.push_back(options.overlap_communication && options.comm_groups != nullptr && def != nullptr &&
                             def->communicates);
    std::vector<bool>& reads = reads_operand.emplace_back(op->num_operands());
    for (size_t k = 0; k < op->num_operands(); ++k) reads[k] = ir::ReadsOperand(*op, k);
  }
  JobPlan job_plan = PlanJobs(program, options.fetch_ids);
  Executor executor(program, std::move(options), backend, std::move(plan), std::move(job_plan), std::move(fns),
                    std::move(on_comm_stream), std::move(reads_operand));
  executor.PlanAccumulation();
  executor.PlanOverwrites();
  executor.PlanCommStreams();
  return executor;
}

void Executor::PlanCommStreams() {
  const auto& ops = program_->block().ops();
  comm_stream_of_.assign(ops.size(), 0);
  comm_stream_names_ = {"comm"};
  if (options_.comm_groups == nullptr) return;
  std::map<comm::ChannelKey, size_t> index;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (!on_comm_stream_[i]) continue;
    const std::optional<comm::ChannelKey> channel = comm::ChannelOf(*ops[i], options_.comm_groups->rank());
    if (!channel) continue;
    const auto [it, added] = index.emplace(*channel, comm_stream_names_.size());
    if (added) {
      comm_stream_names_.push_back(absl::StrCat("p2p ", channel->src, ">", channel->dst,
                                                channel->lane > 0 ? absl::StrCat(" lane ", channel->lane) : ""));
    }
    comm_stream_of_[i] = it->second;
  }
}

void Executor::PlanAccumulation() {
  if (job_plan_.accumulated.empty()) return;
  auto sums = std::make_shared<ir::Program>();
  ir::Builder b(sums.get());
  for (int64_t id : job_plan_.accumulated) {
    const ir::TensorType& type = program_->FindValue(id)->type();
    const std::string name = absl::StrCat("v", id);
    // A type `add` refuses (an integer value) is one JobPlan::unsummable reports before a
    // pipelined step starts.
    absl::StatusOr<ir::Value*> sum = b.Op1("add", {b.Data(name + ".sum", type), b.Data(name + ".share", type)});
    if (sum.ok()) accumulate_op_[id] = (*sum)->producer();
  }
  accumulate_ = std::move(sums);
  add_kernel_ = KernelRegistry::Global().Find(options_.device.type, "add");
}

void Executor::PlanOverwrites() {
  for (const auto& op : program_->block().ops()) overwrites_.push_back(ir::OverwritableOperands(*op));
}

void Executor::OpenStreams(RunState& state) const {
  if (state.compute == nullptr) state.compute = backend_->NewStream(options_.device, StreamPurpose::kCompute);
  if (state.comm.empty()) state.comm.resize(comm_stream_names_.size());
  // Spans are timed on the device: its clock is anchored to the timeline's at the run's start.
  // Without an anchor the run goes on untimed.
  if (state.timeline != nullptr) {
    if (absl::Status s = state.timeline->AnchorClock(*state.compute); !s.ok()) {
      SayOnce(absl::StrCat("timeline: a step runs untimed: ", s.message()));
      state.timeline = nullptr;
    }
  }
}

absl::Status Executor::Accumulate(int64_t id, Tensor& sum, const Tensor& x, RunState& state) const {
  const bool gradient = IsGradient(*program_->FindValue(id));
  if (!sum.defined()) {
    sum = x;
    state.live.Acquire(sum, gradient);
    return absl::OkStatus();
  }
  auto op = accumulate_op_.find(id);
  if (op == accumulate_op_.end() || add_kernel_ == nullptr) {
    return absl::InternalError(absl::StrCat("no ", DeviceTypeName(options_.device.type), " add for summing '",
                                            program_->FindValue(id)->name(), "' over micro-batches"));
  }
  std::vector<Tensor> out(1);
  PDIST_RETURN_IF_ERROR(WithContext(CallKernel(*add_kernel_, *op->second, 0, {&sum, &x}, out, state.compute.get()),
                                    absl::StrCat("summing '", program_->FindValue(id)->name(), "'")));
  state.live.Acquire(out[0], gradient);
  state.live.Release(sum);
  sum = std::move(out[0]);
  return absl::OkStatus();
}

absl::Status Executor::CallKernel(const KernelFn& kernel, const ir::Operation& op, int64_t micro_batch,
                                  std::vector<const Tensor*> inputs, std::vector<Tensor>& outputs, Stream* stream,
                                  std::vector<Tensor>* keep_alive, std::vector<Tensor> donated) const {
  KernelContext ctx(op, std::move(inputs), &outputs);
  for (size_t r = 0; r < donated.size(); ++r) {
    if (donated[r].defined()) ctx.Donate(r, std::move(donated[r]));
  }
  ctx.set_placement(backend_->allocator(options_.device), stream);
  ctx.set_keep_alive(keep_alive);
  ctx.set_comm_groups(options_.comm_groups.get());
  ctx.set_micro_batch(micro_batch);
  try {
    return kernel(ctx);
  } catch (const std::bad_alloc& e) {  // OutOfMemory names the device and its allocator's state
    return absl::ResourceExhaustedError(e.what());
  }
}

std::vector<Tensor> Executor::Donations(size_t index, const std::vector<int64_t>& release, ValueTable& table) const {
  std::vector<Tensor> donated;
  const ir::Operation& op = *program_->block().ops()[index];
  for (const auto& [r, k] : overwrites_[index]) {
    const int64_t id = op.operand(k)->id();
    if (std::find(release.begin(), release.end(), id) == release.end()) continue;  // read later, or kept
    const Tensor& storage = table.values[static_cast<size_t>(id)];
    // The table's is the only reference: no view, alias, fetch or stream in flight holds it.
    if (!storage.defined() || storage.use_count() != 1) continue;
    if (donated.size() <= r) donated.resize(r + 1);
    donated[r] = storage;
  }
  return donated;
}

absl::Status Executor::RunKernel(size_t index, const ir::Operation& op, int64_t micro_batch, std::vector<const Tensor*> inputs,
                                 std::vector<Tensor>& outputs, Stream* stream,
                                 std::map<std::string, double>* op_seconds, std::vector<Tensor>* keep_alive,
                                 std::vector<Tensor> donated, bool compute) const {
  const bool timed = options_.profile && op_seconds != nullptr;
  const auto start = timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
  absl::Status status =
      CallKernel(*kernels_[index], op, micro_batch, std::move(inputs), outputs, stream, keep_alive, std::move(donated));
  // A GPU kernel returns once launched: the profile waits for it, so the time is the kernel's.
  if (timed && compute && status.ok() && stream != nullptr) status = stream->AwaitDeviceWork();
  if (timed) (*op_seconds)[op.type()] += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!status.ok()) return WithContext(status, absl::StrCat("op #", index, " ", op.Describe()));
  for (size_t r = 0; r < op.num_results(); ++r) {
    const ir::Value* result = op.result(r);
    if (!outputs[r].defined() || outputs[r].type() != result->type()) {
      return absl::InternalError(absl::StrCat("kernel of op #", index, " ", op.Describe(), " produced ",
                                              outputs[r].defined() ? outputs[r].type().ToString() : "nothing",
                                              " for result ", r, ", expected ", result->type().ToString()));
    }
    // A kernel allocates its results from its context (the device's allocator), never the host's.
    if (outputs[r].device() != options_.device) {
      return absl::InternalError(absl::StrCat("kernel of op #", index, " ", op.Describe(), " left result ", r, " on ",
                                              outputs[r].device().ToString(), ", the program runs on ",
                                              options_.device.ToString()));
    }
  }
  return absl::OkStatus();
}

absl::Status Executor::BindArguments(const Feeds& feeds, const Workspace& workspace, ValueTable& table) const {
  for (const ir::Value* arg : program_->block().arguments()) {
    const bool fed = arg->role() == ir::ValueRole::kDataInput;
    const std::map<std::string, Tensor>& source = fed ? feeds : workspace;
    auto it = source.find(arg->name());
    if (it == source.end()) {
      if (fed) return absl::InvalidArgumentError(absl::StrCat("no feed for data input '", arg->name(), "'"));
      return absl::FailedPreconditionError(
          absl::StrCat("workspace has no tensor for '", arg->name(), "' (call InitializeWorkspace first)"));
    }
    PDIST_RETURN_IF_ERROR(CheckBound(*arg, it->second, options_.device, fed ? "feed" : "workspace tensor"));
    table.values[static_cast<size_t>(arg->id())] = it->second;
  }
  return absl::OkStatus();
}

absl::Status Executor::Await(int64_t id, ValueTable& table, RunState& state) const {
  Owed& owed = table.owed[static_cast<size_t>(id)];
  const std::shared_ptr<Event>& event = owed.event;
  if (event == nullptr) return absl::OkStatus();
  {
    // Time the compute thread spends waiting for communication (a pipeline stage waiting for its
    // activation): a "wait" span inside the job, so that bubbles count it as idle.
    const bool timed = state.timeline != nullptr && state.in_job && !event->done();
    ScopedSpan span(timed ? state.timeline : nullptr,
                    {.name = "wait", .category = "wait", .micro_batch = state.job.micro_batch, .chunk = state.job.chunk},
                    *state.compute);
    PDIST_RETURN_IF_ERROR(state.compute->WaitFor(event));
  }
  table.values[static_cast<size_t>(id)] = *owed.slot;
  owed = Owed();
  state.live.Unreserve(&table.values[static_cast<size_t>(id)]);
  state.live.Acquire(table.values[static_cast<size_t>(id)], IsGradient(*program_->FindValue(id)));
  return absl::OkStatus();
}

absl::Status Executor::Fail(absl::Status status, RunState& state) const {
  // Stop the peers too (they may wait for this rank in a collective) before the stream's
  // thread is joined.
  if (state.communicated() && options_.comm_groups != nullptr) options_.comm_groups->world().Abort();
  return status;
}

void Executor::SubmitToStream(size_t i, const std::vector<int64_t>& last, ValueTable& table, RunState& state) const {
  const ir::Operation& op = *program_->block().ops()[i];
  const size_t lane = comm_stream_of_[i];
  RunState::CommStream& comm = state.comm[lane];
  if (comm.stream == nullptr) {
    comm.stream = backend_->NewStream(options_.device, StreamPurpose::kCommunication, static_cast<int>(lane));
  }
  Stream* stream = comm.stream.get();
  // Inputs computed here are captured now; inputs from earlier stream ops are read from their
  // slots when this op runs — made by then: by an earlier op of this stream (it runs in order),
  // or of another, whose event this stream waits for first (a received activation that a
  // collective reads). Holding the slot keeps the value alive until this op has run, whatever
  // the compute thread or other streams do with it meanwhile.
  std::vector<Tensor> captured(op.num_operands());
  std::vector<std::pair<size_t, std::shared_ptr<Tensor>>> from_stream;  // (operand, its slot)
  for (size_t k = 0; k < op.num_operands(); ++k) {
    const ir::Value* v = op.operand(k);
    if (v == nullptr) continue;
    const auto id = static_cast<size_t>(v->id());
    if (const Owed& owed = table.owed[id]; owed.event != nullptr) {
      if (owed.stream != stream) stream->WaitFor(owed.event).IgnoreError();
      from_stream.emplace_back(k, owed.slot);
      // Its last use: the compute thread drops it without waiting (Release).
      if (std::find(last.begin(), last.end(), v->id()) != last.end()) table.skip_release[id] = true;
    } else {
      captured[k] = table.values[id];
    }
  }
  // An op that reads what the compute stream made waits for what it has made so far (on the CPU
  // that is done already; on a GPU the communication stream waits for the compute stream's
  // event, not the host). One that reads nothing from it — a receive — does not: on a GPU it is
  // posted at once, so that the transfer overlaps the compute before it. A failure of that wait
  // is also the stream's first error, which the op's event reports.
  if (std::any_of(captured.begin(), captured.end(), [](const Tensor& t) { return t.defined(); })) {
    stream->WaitFor(state.compute->Record()).IgnoreError();
  }
  std::vector<std::shared_ptr<Tensor>> slots(op.num_results());
  for (auto& slot : slots) slot = std::make_shared<Tensor>();
  TimelineSpan span{.name = op.type(), .category = "comm", .track = Track::kComm,
                    .micro_batch = state.in_job ? state.job.micro_batch : -1, .chunk = state.in_job ? state.job.chunk : -1,
                    .lane = comm_stream_names_[lane],
                    .queued_s = state.timeline != nullptr ? state.timeline->Now() : -1};
  const int64_t micro_batch = state.in_job ? state.job.micro_batch : 0;
  // The work function is kept until its device work has run (Stream::Submit), and with it the
  // kernel's temporaries (`scratch`) as well as its inputs (`captured`, `from_stream`).
  // The span is the stream's time between two marks around the op, when the stream ran it.
  std::shared_ptr<TimeMark> start = state.timeline != nullptr ? stream->MarkTime() : nullptr;
  auto event = stream->Submit([this, &op, i, micro_batch, captured = std::move(captured), from_stream, slots, stream,
                               op_seconds = &comm.op_seconds, scratch = std::vector<Tensor>()]() mutable {
    for (const auto& [k, slot] : from_stream) captured[k] = *slot;
    std::vector<const Tensor*> inputs;
    for (size_t k = 0; k < captured.size(); ++k) inputs.push_back(op.operand(k) == nullptr ? nullptr : &captured[k]);
    std::vector<Tensor> outputs(op.num_results());
    PDIST_RETURN_IF_ERROR(
        RunKernel(i, op, micro_batch, std::move(inputs), outputs, stream, op_seconds, &scratch, {}, /*compute=*/false));
    for (size_t r = 0; r < outputs.size(); ++r) *slots[r] = std::move(outputs[r]);
    return absl::OkStatus();
  });
  if (state.timeline != nullptr) state.timeline->AddMarked(std::move(span), std::move(start), stream->MarkTime());
  for (size_t r = 0; r < op.num_results(); ++r) {
    const auto id = static_cast<size_t>(op.result(r)->id());
    table.owed[id] = {.event = event, .stream = stream, .slot = slots[r]};
    state.live.Reserve(&table.values[id], op.result(r)->type().num_bytes(), IsGradient(*op.result(r)));
  }
}

absl::Status Executor::RunOps(const std::vector<size_t>& indices, const std::vector<std::vector<int64_t>>& release_after,
                              ValueTable& table, RunState& state, const OpHook& after_op) const {
  const auto& ops = program_->block().ops();
  for (size_t i : indices) {
    const ir::Operation& op = *ops[i];
    if (on_comm_stream_[i]) {
      SubmitToStream(i, release_after[i], table, state);
    } else {
      std::vector<const Tensor*> inputs;
      inputs.reserve(op.num_operands());
      for (size_t k = 0; k < op.num_operands(); ++k) {
        // An operand whose type alone the kernel reads (ir::OpDef::type_only_operands) may be
        // freed already: the kernel gets no tensor for it.
        if (!reads_operand_[i][k]) {
          inputs.push_back(nullptr);
          continue;
        }
        const ir::Value* v = op.operand(k);
        if (absl::Status s = Await(v->id(), table, state); !s.ok()) return Fail(s, state);
        inputs.push_back(&table.values[static_cast<size_t>(v->id())]);
      }
      std::vector<Tensor> outputs(op.num_results());
      const int64_t micro_batch = state.in_job ? state.job.micro_batch : 0;
      std::vector<Tensor> donated = overwrites_[i].empty() ? std::vector<Tensor>{} : Donations(i, release_after[i], table);
      if (absl::Status s = RunKernel(i, op, micro_batch, std::move(inputs), outputs, state.compute.get(),
                                     &state.op_seconds, nullptr, std::move(donated));
          !s.ok()) {
        return Fail(s, state);
      }
      for (size_t r = 0; r < op.num_results(); ++r) {
        state.live.Acquire(outputs[r], IsGradient(*op.result(r)));
        table.values[static_cast<size_t>(op.result(r)->id())] = std::move(outputs[r]);
      }
    }
    if (after_op) {
      if (absl::Status s = after_op(i); !s.ok()) return Fail(s, state);
    }
    if (absl::Status s = Release(release_after[i], table, state); !s.ok()) return Fail(s, state);
    InstallUpdates(i, table, state);
  }
  return absl::OkStatus();
}

void Executor::InstallUpdates(size_t i, ValueTable& table, RunState& state) const {
  if (state.workspace == nullptr) return;
  for (size_t u : plan_.install_after[i]) {
    const ir::StateUpdate& update = program_->updates()[u];
    const auto fresh = static_cast<size_t>(update.new_value->id());
    // A value the communication stream still owes (a ZeRO all-gather of updated parameters)
    // is installed when the step finishes: waiting for it here would stall the compute stream.
    if (table.owed[fresh].event != nullptr) continue;
    (*state.workspace)[update.state->name()] = table.values[fresh];
    table.values[static_cast<size_t>(update.state->id())] = Tensor();  // the old tensor's last reference here
    state.live.Release(table.values[fresh]);  // persistent from now on, like the state it replaces
  }
}

absl::Status Executor::Release(const std::vector<int64_t>& ids, ValueTable& table, RunState& state) const {
  for (int64_t id : ids) {
    // An input of a stream op was captured by it; a value the stream made and a stream op reads
    // last is held by that op (its slot); any other value the stream owes is waited for before
    // it is dropped.
    if (table.skip_release[static_cast<size_t>(id)]) {
      // Freed once its last reader there has run: counted until that is submitted.
      state.live.Unreserve(&table.values[static_cast<size_t>(id)]);
      table.owed[static_cast<size_t>(id)] = Owed();
      continue;
    }
    PDIST_RETURN_IF_ERROR(Await(id, table, state));
    state.live.Release(table.values[static_cast<size_t>(id)]);
    table.values[static_cast<size_t>(id)] = Tensor();
  }
  return absl::OkStatus();
}

absl::Status Executor::Drain(std::vector<ValueTable*> tables, RunState& state) const {
  if (state.communicated()) {
    if (absl::Status s = state.SynchronizeComm(); !s.ok()) return Fail(s, state);
    for (ValueTable* table : tables) {
      for (size_t id = 0; id < table->owed.size(); ++id) {
        if (absl::Status s = Await(static_cast<int64_t>(id), *table, state); !s.ok()) return Fail(s, state);
      }
    }
  }
  if (absl::Status s = state.compute->Synchronize(); !s.ok()) return Fail(s, state);
  // A device backend's collective can fail after it was enqueued (a watchdog's deadline, an
  // NCCL error): its communicator records why, and the step must not pass as done.
  if (options_.comm_groups != nullptr) PDIST_RETURN_IF_ERROR(options_.comm_groups->AsyncError());
  // Every stream has run its work: the marks of this run's spans can be read. The step is done
  // whatever they say.
  if (state.timeline != nullptr) {
    if (absl::Status s = state.timeline->ResolveMarks(); !s.ok()) {
      SayOnce(absl::StrCat("timeline: a step's spans dropped: ", s.message()));
    }
  }
  return absl::OkStatus();
}

namespace {

// The job kind a whole-program step's op belongs to on a timeline (its role, as a job).
ir::JobKind KindOfRole(ir::OpRole role) {
  switch (role) {
    case ir::OpRole::kForward:
    case ir::OpRole::kPrologue: return ir::JobKind::kForward;
    case ir::OpRole::kOptimizer: return ir::JobKind::kOptimizer;
    case ir::OpRole::kBackward:
    case ir::OpRole::kBackwardWeight: return ir::JobKind::kBackward;
  }
  return ir::JobKind::kForward;
}

}  // namespace

absl::StatusOr<RunResult> Executor::Run(const Feeds& feeds, Workspace& workspace, TimelineRecorder* timeline) const {
  const ir::Program& program = *program_;
  ValueTable table(static_cast<size_t>(program.num_values()));
  PDIST_RETURN_IF_ERROR(BindArguments(feeds, workspace, table));
  RunState state;
  state.timeline = timeline;
  state.workspace = &workspace;
  OpenStreams(state);  // may drop the timeline (state.timeline) for this run
  const auto& ops = program.block().ops();
  if (state.timeline == nullptr) {
    std::vector<size_t> all(ops.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = i;
    PDIST_RETURN_IF_ERROR(RunOps(all, plan_.release_after, table, state, nullptr));
  } else {
    // One span per run of ops of one role, so that a data- or tensor-parallel step draws as its
    // forward, backward and optimizer with the communication beneath them. A collective joins
    // the run it stands in (a gradient all-reduce moved into the backward is of role optimizer).
    auto communicates = [&](size_t i) {
      const ir::OpDef* def = ir::OpRegistry::Global().Find(ops[i]->type());
      return def != nullptr && def->communicates;
    };
    for (size_t begin = 0; begin < ops.size();) {
      const ir::JobKind kind = KindOfRole(ops[begin]->role());
      std::vector<size_t> run;
      size_t end = begin;
      for (; end < ops.size() && (end == begin || communicates(end) || KindOfRole(ops[end]->role()) == kind); ++end) {
        run.push_back(end);
      }
      state.job = {kind, 0, 0};
      state.in_job = true;
      const char* name = kind == ir::JobKind::kForward ? "F" : kind == ir::JobKind::kOptimizer ? "O" : "B";
      ScopedSpan span(state.timeline, {.name = name, .category = ir::JobKindName(kind)}, *state.compute);
      PDIST_RETURN_IF_ERROR(RunOps(run, plan_.release_after, table, state, nullptr));
      begin = end;
    }
  }
  PDIST_RETURN_IF_ERROR(Drain({&table}, state));
  return Finish(table.values, table.values, state, workspace);
}

absl::StatusOr<RunResult> Executor::Finish(const std::vector<Tensor>& loss_source, const std::vector<Tensor>& values,
                                           RunState& state, Workspace& workspace) const {
  const ir::Program& program = *program_;
  RunResult result;
  result.peak_bytes = state.live.peak();
  result.peak_gradient_bytes = state.live.gradient_peak();
  result.peak_activation_bytes = state.live.activation_peak();
  result.op_seconds = std::move(state.op_seconds);
  for (const RunState::CommStream& comm : state.comm) {
    for (const auto& [type, seconds] : comm.op_seconds) result.op_seconds[type] += seconds;  // drained by now
  }
  if (program.loss() != nullptr) {
    PDIST_ASSIGN_OR_RETURN(Tensor loss, ToDevice(loss_source[static_cast<size_t>(program.loss()->id())], Device::Cpu()));
    result.loss = loss.At(0);
    result.has_loss = true;
  }
  for (int64_t id : options_.fetch_ids) result.fetched[id] = values[static_cast<size_t>(id)];
  for (const ir::StateUpdate& u : program.updates()) {
    workspace[u.state->name()] = values[static_cast<size_t>(u.new_value->id())];
  }
  return result;
}

}  // namespace pdist::exec
